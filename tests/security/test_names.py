"""Names: whatever a person or a request brings becomes a Kubernetes name, label or
environment key only when the rules accepted it or the platform mapped it to a safe, unique
identifier; a record the API server refuses fails its workload alone (DESIGN.md, "Names")."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.db.models import F, Sum
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts import core as accounts_core
from apps.accounts.models import Team, User
from apps.catalog.models import Cluster, GpuClass, Image
from apps.orchestration import manifests as m
from apps.orchestration import selectors, services
from apps.orchestration.clusters import forget_clients, kube_for
from apps.orchestration.errors import ClusterRefused
from apps.orchestration.models import HomeVolume
from apps.workloads import core as wl
from apps.workloads import rules
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)

# What the API server accepts (k8s.io/apimachinery validation).
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

COLLIDING_PAIRS = [("eve", "Eve"), ("alice.smith", "alice_smith"), ("bob-2", "bob.2")]
POISON_USERNAMES = ["eve.", "josé", "\u202eevil", "a" * 150, "..."]


def charged_milli(team: Team) -> int:
    """GPU milli the team's admitted, starting and running workloads hold."""
    live = Workload.objects.filter(team=team, state__in=selectors.LIVE_STATES)
    return int(live.aggregate(n=Sum(F("gpu_milli") * F("replicas")))["n"] or 0)


def notebook_of(owner: User, team: Team, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": team,
        "owner": owner,
        "kind": wl.KIND_NOTEBOOK,
        "priority_class": wl.PRIORITY_DEVELOPMENT,
        "command": [],
        "args": [],
        "state": wl.ADMITTED,
    }
    values.update(kw)
    return WorkloadFactory(**values)


# --- at submit: the rule set ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["É", "A²", "ñ", "PATH\u202e", "1ABC", "A-B", "A.B"])
def test_poison_environment_names_are_refused_at_submit(name: str) -> None:
    assert rules.env_problem(wl.KIND_TRAINING, {name: "1"})


@pytest.mark.parametrize("key", ["ñ", "É", "lr²", "a.b", "a-b"])
def test_poison_grid_keys_are_refused_at_submit(key: str) -> None:
    assert rules.grid_problem(wl.KIND_SWEEP, {key: ["1", "2"]})


@pytest.mark.parametrize("slug", ["ml\n", "ML", "ml.vision", "-ml", "ml-", "mlé", ""])
def test_team_slugs_that_cannot_name_a_namespace_are_refused(slug: str) -> None:
    assert accounts_core.slug_problem(slug)


def test_sweep_environment_keys_stay_ascii_whatever_the_database_holds() -> None:
    # The rules never let "ñ" through; a row written around them still yields no key the
    # API server refuses.
    assert m._env_key("ñ") == "SWEEP__"
    assert m._env_key("lr") == "SWEEP_LR"


# --- per-person names ------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "second"), COLLIDING_PAIRS)
def test_colliding_usernames_get_different_home_claims(first: str, second: str) -> None:
    team = TeamFactory()
    one, two = UserFactory(username=first), UserFactory(username=second)
    claims = {
        services.home_volume_ensure(user_id=one.pk, team=team),
        services.home_volume_ensure(user_id=two.pk, team=team),
    }
    assert claims == {f"home-u{one.pk}", f"home-u{two.pk}"}
    # Stored, and what the notebooks' specs mount.
    assert selectors.workload_spec(notebook_of(one, team)).home_claim == f"home-u{one.pk}"
    assert selectors.workload_spec(notebook_of(two, team)).home_claim == f"home-u{two.pk}"


@pytest.mark.django_db
def test_home_claim_is_stable_and_per_team() -> None:
    team, other = TeamFactory(), TeamFactory()
    user = UserFactory(username="eve")
    first = services.home_volume_ensure(user_id=user.pk, team=team)
    user.username = "eve.renamed"
    user.save()
    assert services.home_volume_ensure(user_id=user.pk, team=team) == first
    assert services.home_volume_ensure(user_id=user.pk, team=other) == first
    assert HomeVolume.objects.filter(user=user).count() == 2


@pytest.mark.django_db
def test_new_claim_skips_a_name_an_earlier_volume_holds() -> None:
    team = TeamFactory()
    holder, newcomer = UserFactory(username="someone"), UserFactory()
    HomeVolume.objects.create(user=holder, team=team, claim=f"home-u{newcomer.pk}")
    assert services.home_volume_ensure(user_id=newcomer.pk, team=team) == (f"home-u{newcomer.pk}-1")


@pytest.mark.django_db
def test_migration_keeps_existing_volumes_and_splits_collisions() -> None:
    migration = importlib.import_module("apps.orchestration.migrations.0003_home_volumes_kept")
    from django.apps import apps as django_apps

    team = TeamFactory()
    eve, eve_upper = UserFactory(username="eve"), UserFactory(username="Eve")
    alice, alice_under = UserFactory(username="alice.smith"), UserFactory(username="alice_smith")
    jose = UserFactory(username="josé")
    # "u<id>" as a username: its old name is kept, and no new name takes it.
    squatter = UserFactory(username=f"u{eve_upper.pk}")
    for owner in (eve, alice, eve_upper, alice_under, jose, squatter, eve):
        notebook_of(owner, team, state=wl.SUCCEEDED)
    HomeVolume.objects.all().delete()

    migration.keep_home_volumes(django_apps, None)

    claims = dict(HomeVolume.objects.filter(team=team).values_list("user__username", "claim"))
    assert claims == {
        "eve": "home-eve",  # first: keeps the volume and its data
        "alice.smith": "home-alice-smith",
        "Eve": f"home-u{eve_upper.pk}-1",  # "home-u<id>" is the squatter's old volume
        "alice_smith": f"home-u{alice_under.pk}",
        "josé": f"home-u{jose.pk}",  # "home-josé" was never a volume the server accepted
        f"u{eve_upper.pk}": f"home-u{eve_upper.pk}",
    }
    assert len(set(claims.values())) == len(claims)


def test_home_claim_names_the_owner_by_id_not_username() -> None:
    assert m.home_claim_manifest(
        namespace="team-vision", claim="home-u7", owner_id=7, team_slug="vision", size="20Gi"
    ) == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "home-u7",
            "namespace": "team-vision",
            "labels": {
                "app.kubernetes.io/managed-by": "gpupaas",
                "gpupaas.io/team": "vision",
                "gpupaas.io/owner-id": "7",
            },
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}},
    }


# --- object counts -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_team_quota_counts_objects_from_settings(settings: Any) -> None:
    settings.TEAM_MAX_JOBS = 300
    team = TeamFactory()
    quota = next(
        o for o in m.team_manifests(selectors.team_spec(team)) if o["kind"] == "ResourceQuota"
    )
    assert quota["spec"]["hard"] == {
        "count/configmaps": "50",
        "count/jobs.batch": "300",
        "count/persistentvolumeclaims": "100",
        "count/pods": "1k",
        "count/secrets": "200",
        "count/services": "200",
        "requests.storage": "1Ti",  # the team volume, home volumes and dataset claims
    }


@pytest.mark.parametrize(
    ("value", "written"), [(1000, "1k"), (1500, "1500"), (2_000_000, "2M"), (50, "50"), (0, "0")]
)
def test_object_counts_are_written_as_the_api_server_reads_them_back(
    value: int, written: str
) -> None:
    assert m.canonical_count(value) == written


# --- on the simulated cluster --------------------------------------------------------------------


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def core_api(kube_api_client: Any) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_api_client)


@pytest.fixture
def team(cluster: Cluster, core_api: k8s.CoreV1Api) -> Iterator[Team]:
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    try:
        core_api.delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.mark.kubesim
@pytest.mark.django_db
def test_team_namespace_has_object_count_quotas(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api, settings: Any
) -> None:
    hard = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).spec.hard
    # The server's canonical form, which the manifest already uses: no replace on every pass.
    assert hard["count/jobs.batch"] == "1k"
    assert hard["count/pods"] == "1k"
    assert {"count/secrets", "count/configmaps", "count/services"} <= set(hard)
    assert hard["count/persistentvolumeclaims"] == "100"
    assert hard["requests.nvidia.com/gpu"] == "8"
    # A count no longer configured is removed, not left behind by a merge.
    kube = kube_for(cluster)
    applied = kube.apply(
        next(o for o in m.team_manifests(selectors.team_spec(team)) if o["kind"] == "ResourceQuota")
    )
    assert not applied.patched  # read back equal: nothing rewritten
    # A changed count reaches the cluster.
    settings.TEAM_MAX_SECRETS = 3
    services.team_namespace_ensure(team=team)
    hard = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).spec.hard
    assert hard["count/secrets"] == "3"


@pytest.mark.kubesim
@pytest.mark.django_db
def test_poison_usernames_get_home_volumes_the_cluster_accepts(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api
) -> None:
    image = ImageFactory(name="nb", kind="notebook", reference="quay.io/jupyter/base:1")
    for username in POISON_USERNAMES:
        owner = UserFactory(username=username)
        workload = notebook_of(owner, team, image=image, placement={"replicas": []})
        assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
        workload.refresh_from_db()
        assert workload.state == wl.STARTING, workload.last_reason
        claim = HomeVolume.objects.get(user=owner, team=team).claim
        pvc = core_api.read_namespaced_persistent_volume_claim(claim, team.namespace)
        assert pvc.metadata.labels[m.LABEL_OWNER_ID] == str(owner.pk)


@pytest.mark.kubesim
@pytest.mark.django_db
def test_refused_object_fails_its_workload_and_the_pass_goes_on(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    """A poison record (an environment name written around the rules) fails with the API
    server's message and frees its quota; in the same pass another workload gets its objects,
    a workload stopped in the database loses its StatefulSet, and an orphaned Secret goes."""
    batch = k8s.BatchV1Api(kube_api_client)
    apps_api = k8s.AppsV1Api(kube_api_client)
    placement = {"replicas": [{"node": "h100-0"}]}
    nb_image = ImageFactory(name="nb", kind="notebook", reference="quay.io/jupyter/base:1")
    # A notebook that ran; then its state changed in the database only.
    stopped = notebook_of(UserFactory(), team, image=nb_image, placement=placement)
    assert services.workload_reconcile(workload_id=stopped.pk) == "ensured"
    Workload.objects.filter(pk=stopped.pk).update(state=wl.CANCELLED)
    # An orphan: a Secret with our labels for a workload that is not live.
    gone = WorkloadFactory(team=team, state=wl.SUCCEEDED)
    core_api.create_namespaced_secret(
        team.namespace,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(
                name="orphan",
                labels={m.LABEL_MANAGED_BY: m.MANAGED_BY, m.LABEL_WORKLOAD: str(gone.pk)},
            ),
            string_data={"x": "y"},
        ),
    )
    poison = WorkloadFactory(
        team=team, state=wl.ADMITTED, env={"É": "1", "A²": "2"}, placement=placement
    )
    # A kind no builder knows (written around the rules): fails alone too.
    odd = WorkloadFactory(team=team, state=wl.ADMITTED, kind="unknown", placement=placement)
    good = WorkloadFactory(team=team, state=wl.ADMITTED, placement=placement)
    before = charged_milli(team)

    result = services.reconcile_pass(cluster=cluster)

    poison.refresh_from_db()
    assert poison.state == wl.FAILED
    assert poison.last_reason.startswith("cannot be started: ")
    assert "É" in poison.last_reason and "Invalid value" in poison.last_reason
    odd.refresh_from_db()
    assert (odd.state, odd.last_reason) == (
        wl.FAILED,
        "cannot be started: No manifests for workloads of kind 'unknown'.",
    )
    assert charged_milli(team) == before - poison.gpu_milli - odd.gpu_milli
    good.refresh_from_db()
    assert good.state == wl.STARTING, good.last_reason
    label = f"{m.LABEL_WORKLOAD}="
    assert batch.list_namespaced_job(team.namespace, label_selector=f"{label}{good.pk}").items
    assert not batch.list_namespaced_job(team.namespace, label_selector=f"{label}{poison.pk}").items
    assert not apps_api.list_namespaced_stateful_set(
        team.namespace, label_selector=f"{label}{stopped.pk}"
    ).items
    with pytest.raises(ApiException) as missing:
        core_api.read_namespaced_secret("orphan", team.namespace)
    assert missing.value.status == 404
    assert result.created == 1 and result.deleted == 1 and result.orphans_deleted >= 1
    # The next pass finds nothing to do and nothing to complain about.
    again = services.reconcile_pass(cluster=cluster)
    assert (again.created, again.errors, again.unreachable) == (0, [], [])


# --- hostile names, generated -------------------------------------------------------------------

HOSTILE = "aAzZ09-_. \n\t/\\:@'\"éÉñß²ı\u0130\u202e\u200b\u202d\U0001f600"


def _hostile(max_size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=HOSTILE, min_size=0, max_size=max_size)


usernames = st.one_of(_hostile(160), st.from_regex(r"[A-Za-z0-9._@+-]{1,150}", fullmatch=True))
# Fields the rules may refuse lean to acceptable values, so that most examples reach the
# cluster; the hostile branch still tries what the rules must stop.
slugs = st.one_of(
    st.from_regex(r"[a-z0-9]([a-z0-9-]{0,56}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]{1,57}", fullmatch=True),
    _hostile(70),
)
SAFE = "".join(c for c in HOSTILE if c not in "\n\t")
workload_names = st.one_of(
    st.from_regex(r"[^\x00-\x1f]{1,100}", fullmatch=True),
    st.text(alphabet=SAFE, min_size=1, max_size=100),
    _hostile(120),
)
valid_env_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)
# A hostile environment name or grid key in a third of the examples.
maybe_hostile_key = st.one_of(st.none(), st.none(), _hostile(20))
env_values = st.text(max_size=64)
kinds = st.sampled_from([wl.KIND_NOTEBOOK, wl.KIND_TRAINING, wl.KIND_SWEEP])


def _in_namespace(manifest: m.Manifest, namespace: str) -> m.Manifest:
    if "namespace" in manifest["metadata"]:
        manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    return manifest


@pytest.mark.kubesim
@pytest.mark.django_db
def test_every_accepted_hostile_request_makes_objects_the_cluster_accepts(
    cluster: Cluster, k8s_namespace: str
) -> None:
    """Hostile usernames, team slugs, workload names, environment names and grid keys: for
    every request the rules accept, the API server accepts every object in a dry run
    (the namespaced ones are tried in an existing namespace; the team's own is tried by name)."""
    kube = kube_for(cluster)
    gpu_class: GpuClass = GpuClassFactory()
    image: Image = ImageFactory()
    seen = {"accepted": 0, "objects": 0}

    @hypothesis_settings(
        max_examples=60,
        deadline=None,
        derandomize=True,  # the same examples on every run: a CI failure reproduces
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        username=usernames,
        slug=slugs,
        name=workload_names,
        kind=kinds,
        env=st.dictionaries(valid_env_name, env_values, max_size=3),
        grid=st.dictionaries(
            valid_env_name, st.lists(env_values, min_size=1, max_size=2), max_size=2
        ),
        hostile_key=maybe_hostile_key,
    )
    def check(
        username: str,
        slug: str,
        name: str,
        kind: str,
        env: dict[str, str],
        grid: dict[str, list[str]],
        hostile_key: str | None,
    ) -> None:
        grid = grid if kind == wl.KIND_SWEEP else {}
        if kind == wl.KIND_SWEEP and not grid:
            grid = {"lr": ["0.1"]}
        if hostile_key is not None:
            env = {**env, hostile_key: "1"}
            if grid:
                grid = {**grid, hostile_key: ["1"]}
        if (
            accounts_core.slug_problem(slug)
            or rules.name_problem(name)
            or rules.env_problem(kind, env)
            or rules.grid_problem(kind, grid or None)
        ):
            return  # refused at submit: nothing reaches the cluster
        seen["accepted"] += 1
        team = Team.objects.filter(slug=slug).first() or TeamFactory(
            slug=slug, namespace=accounts_core.namespace_for_slug(slug)
        )
        owner = User.objects.filter(username=username).first() or UserFactory(username=username)
        workload = WorkloadFactory(
            team=team,
            owner=owner,
            name=name,
            kind=kind,
            env=env,
            params={"grid": grid} if grid else {},
            replicas=rules.grid_points(grid) if grid else 1,
            gpu_class=gpu_class,
            image=image,
            priority_class=wl.DEFAULT_PRIORITY[kind],
            state=wl.ADMITTED,
        )
        spec = selectors.workload_spec(workload)
        objects = list(m.team_manifests(selectors.team_spec(team)))
        if kind == wl.KIND_NOTEBOOK:
            claim = services.home_volume_ensure(user_id=owner.pk, team=team)
            objects.append(
                m.home_claim_manifest(
                    namespace=spec.namespace,
                    claim=claim,
                    owner_id=owner.pk,
                    team_slug=spec.team_slug,
                    size=spec.home_size,
                )
            )
            objects.append(m.notebook_token_secret(spec=spec, token="t"))
        objects.extend(m.workload_manifests(spec))
        for manifest in objects:
            try:
                kube.dry_run(_in_namespace(manifest, k8s_namespace))
            except ClusterRefused as exc:
                raise AssertionError(
                    f"{manifest['kind']} {manifest['metadata']['name']!r} refused for "
                    f"username={username!r} slug={slug!r} env={env!r} grid={grid!r}: {exc}"
                ) from exc
            seen["objects"] += 1

    check()
    print(f"hostile names: {seen}")  # how many reached the cluster (pytest -s)
    assert seen["accepted"] >= 10 and seen["objects"] > 0


@pytest.mark.django_db
def test_gpu_runtime_variables_follow_the_configured_policy(settings: Any) -> None:
    """The list of reserved variables is a setting; the platform's own stay reserved."""
    from apps.catalog.models import GpuClass
    from apps.workloads import rules
    from apps.workloads.selectors import request_context
    from tests.factories import ImageFactory, TeamQuotaFactory

    quota = TeamQuotaFactory()
    member = UserFactory()
    quota.team.memberships.create(user=member, role="member")
    gpu_class = GpuClass.objects.get(pk=quota.gpu_class_id)

    def refused(env: dict[str, str]) -> str | None:
        context = request_context(
            actor=member, team=quota.team, gpu_class=gpu_class, image=ImageFactory()
        )
        return rules.env_problem("training", env, context.reserved_env)

    assert refused({"LD_LIBRARY_PATH": "/x"}) is not None  # the default covers the loader
    settings.ENV_RESERVED = ["VENDOR_*", "LD_AUDIT"]
    assert refused({"VENDOR_HOOK": "1"}) is not None
    assert refused({"LD_LIBRARY_PATH": "/x"}) is None  # no longer on the configured list
    assert refused({"GPUPAAS_RESTART_COUNT": "9"}) is not None  # the platform's, always
