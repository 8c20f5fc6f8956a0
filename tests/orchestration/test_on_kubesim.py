"""Orchestration against the real control plane of deploy/kubesim (no mocked client)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients, kube_for
from apps.orchestration.errors import ClusterUnreachable
from apps.workloads import core as wl
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
from tests.plugins.redis_server import free_port
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


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
    h100 = GpuClassFactory()
    TeamQuotaFactory(team=team, gpu_class=h100, guaranteed_milli=4000, limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    try:
        core_api.delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def admitted(team: Team, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": team,
        "owner": UserFactory(),
        "gpu_class": GpuClassFactory(),
        "image": ImageFactory(),
        "state": wl.ADMITTED,
        "placement": {"replicas": [{"node": "h100-0"}]},
        "params": {"pod_annotations": {"kubesim.io/run-duration": "1s"}},
    }
    values.update(kw)
    return WorkloadFactory(**values)


def gpu_limits(hard: dict[str, str]) -> dict[str, str]:
    """A ResourceQuota's GPU limits, without the object counts and the storage every team
    namespace has."""
    return {k: v for k, v in hard.items() if k.startswith("requests.") and k != "requests.storage"}


def jobs_of(kube_api_client: Any, team: Team, workload: Workload) -> list[Any]:
    return (
        k8s.BatchV1Api(kube_api_client)
        .list_namespaced_job(team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
        .items
    )


def test_team_namespace_is_restricted_with_quota_and_default_deny(
    team: Team, core_api: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    namespace = core_api.read_namespace(team.namespace)
    assert namespace.metadata.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    quota = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace)
    assert gpu_limits(quota.spec.hard) == {"requests.nvidia.com/gpu": "8"}
    account = core_api.read_namespaced_service_account(m.SERVICE_ACCOUNT, team.namespace)
    assert account.automount_service_account_token is False
    policies = k8s.NetworkingV1Api(kube_api_client).list_namespaced_network_policy(team.namespace)
    assert {p.metadata.name for p in policies.items} == {
        "default-deny",
        "allow-dns",
        "allow-notebook-ingress",
    }
    classes = k8s.SchedulingV1Api(kube_api_client).read_priority_class("gpupaas-batch")
    assert (classes.value, classes.preemption_policy) == (1000, "Never")
    # Applying again changes nothing and raises nothing.
    services.team_namespace_ensure(team=team)


def test_quota_change_reaches_the_resource_quota(team: Team, core_api: k8s.CoreV1Api) -> None:
    quota = team.quotas.get()
    quota.limit_milli = 12000
    quota.save()
    services.team_namespace_ensure(team=team)
    hard = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).spec.hard
    assert gpu_limits(hard) == {"requests.nvidia.com/gpu": "12"}


def test_deleted_quota_disappears_from_the_resource_quota(
    team: Team, core_api: k8s.CoreV1Api
) -> None:
    shared = GpuClassFactory(name="L40S-TS", sharing_mode="timeslice", timeslice_replicas=4)
    TeamQuotaFactory(team=team, gpu_class=shared, guaranteed_milli=0, limit_milli=2000)
    services.team_namespace_ensure(team=team)
    hard = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).spec.hard
    assert set(gpu_limits(hard)) == {"requests.nvidia.com/gpu", "requests.nvidia.com/gpu.shared"}
    team.quotas.filter(gpu_class=shared).delete()
    services.team_namespace_ensure(team=team)
    hard = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace).spec.hard
    assert gpu_limits(hard) == {"requests.nvidia.com/gpu": "8"}


def test_inventory_sync_mirrors_gpu_nodes_and_capacity(cluster: Cluster) -> None:
    h100 = GpuClassFactory(capacity_gpus=0)
    mig = GpuClass.objects.create(
        name="A100-MIG",
        product_label="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        sharing_mode="mig",
        mig_profiles=["1g.10gb", "2g.20gb", "3g.40gb"],
    )
    assert services.cluster_inventory_sync(cluster=cluster) == 9
    h100.refresh_from_db()
    mig.refresh_from_db()
    assert h100.capacity_gpus == 32
    assert mig.capacity_gpus == 16
    node = ClusterNode.objects.get(cluster=cluster, name="a100-mig-0")
    assert node.gpu_class == mig
    # Every GPU of the node is partitioned the same way.
    assert node.mig_layout == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    uuids = ClusterNode.objects.get(name="h100-0").gpu_uuids
    assert len(uuids) == 8
    assert all(u.startswith("GPU-") for u in uuids), uuids
    assert ClusterNode.objects.get(name="h100-0").ready


def test_admitted_job_runs_and_succeeds_with_cluster_times(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    workload = admitted(team)
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    workload.refresh_from_db()
    assert workload.state == wl.STARTING
    assert {
        "kind": "Job",
        "namespace": team.namespace,
        "name": f"wl-{workload.pk}",
    } in workload.k8s_objects

    def state() -> str | None:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state if workload.state in wl.TERMINAL_STATES else None

    assert wait_for(state, timeout=40) == wl.SUCCEEDED
    assert workload.started_at is not None and workload.finished_at is not None
    assert workload.finished_at >= workload.started_at
    states = list(workload.events.values_list("to_state", flat=True))
    assert states[-3:] == [wl.STARTING, wl.RUNNING, wl.SUCCEEDED] or states[-2:] == [
        wl.STARTING,
        wl.SUCCEEDED,
    ]
    # Finished: the objects are cleaned up.
    wait_for(lambda: not jobs_of(kube_api_client, team, workload))


def test_failing_command_fails_the_workload_with_the_exit_code(
    team: Team, cluster: Cluster
) -> None:
    workload = admitted(
        team,
        params={"pod_annotations": {"kubesim.io/exit-code": "3", "kubesim.io/run-duration": "1s"}},
    )
    services.workload_reconcile(workload_id=workload.pk)

    def failed() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.FAILED

    wait_for(failed, timeout=40)
    assert "exited with code 3" in workload.last_reason


def test_reconcile_twice_and_after_a_crash_leaves_exactly_one_job(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    workload = admitted(team, params={"pod_annotations": {"kubesim.io/run-duration": "10m"}})
    # A worker created the objects, then died before writing anything to the database.
    kube_for(cluster).apply_all(
        m.workload_manifests(services.workload_spec(workload)), workload_id=workload.pk
    )
    assert Workload.objects.get(pk=workload.pk).k8s_objects == []
    services.workload_reconcile(workload_id=workload.pk)
    services.workload_reconcile(workload_id=workload.pk)
    assert len(jobs_of(kube_api_client, team, workload)) == 1
    workload.refresh_from_db()
    assert workload.state == wl.STARTING
    assert len(workload.k8s_objects) == 1


def test_cancel_deletes_objects_and_orphans_are_swept(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    keep = admitted(team, params={"pod_annotations": {"kubesim.io/run-duration": "10m"}})
    cancel = admitted(team, params={"pod_annotations": {"kubesim.io/run-duration": "10m"}})
    for w in (keep, cancel):
        services.workload_reconcile(workload_id=w.pk)
    Workload.objects.filter(pk=cancel.pk).update(state=wl.CANCELLED)
    # An object of ours whose workload no longer exists at all.
    orphan = admitted(team)
    kube_for(cluster).apply_all(
        m.workload_manifests(services.workload_spec(orphan)), workload_id=orphan.pk
    )
    orphan.events.all().delete()
    Workload.objects.filter(pk=orphan.pk).delete()
    result = services.reconcile_pass(cluster=cluster)
    assert result.deleted == 1
    assert result.orphans_deleted >= 1
    wait_for(lambda: not jobs_of(kube_api_client, team, cancel))
    assert not jobs_of(kube_api_client, team, orphan)
    assert len(jobs_of(kube_api_client, team, keep)) == 1


def test_an_ended_runs_objects_are_deleted_even_when_none_was_recorded(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    """A worker created a two-replica training run's objects (Job, headless Service, peer
    NetworkPolicy) and died before recording their names; the run is cancelled. Deleting its
    objects sweeps those kinds by label and leaves another run's alone."""
    two = {"replicas": [{"node": "h100-0"}, {"node": "h100-1"}]}
    run = admitted(team, replicas=2, placement=two, params={"pod_annotations": {}})
    other = admitted(team, replicas=2, placement=two, params={"pod_annotations": {}})
    kube = kube_for(cluster)
    for w in (run, other):
        applied = kube.apply_all(m.workload_manifests(services.workload_spec(w)), workload_id=w.pk)
        assert sorted(a.kind for a in applied) == ["Job", "NetworkPolicy", "Service"]
    Workload.objects.filter(pk=run.pk).update(state=wl.CANCELLED)
    assert services.workload_reconcile(workload_id=run.pk) == "deleted"

    def left(w: Workload) -> list[str]:
        selector = f"{m.LABEL_WORKLOAD}={w.pk}"
        return [
            kind
            for version, kind in services.WORKLOAD_KINDS
            for obj in kube.list_owned(
                version, kind, namespace=team.namespace, label_selector=selector
            )
            if not (obj["metadata"].get("deletionTimestamp"))
        ]

    assert left(run) == []
    assert sorted(left(other)) == ["Job", "NetworkPolicy", "Service"]


def test_foreign_object_with_our_name_is_never_adopted(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    workload = admitted(team)
    foreign = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"wl-{workload.pk}",
            "namespace": team.namespace,
            "labels": {"owner": "someone"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 1000,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "x",
                            "image": "busybox",
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                        }
                    ],
                }
            }
        },
    }
    k8s.BatchV1Api(kube_api_client).create_namespaced_job(team.namespace, foreign)
    services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.state == wl.FAILED
    assert "not managed by gpupaas" in workload.last_reason
    services.reconcile_pass(cluster=cluster)
    job = k8s.BatchV1Api(kube_api_client).read_namespaced_job(f"wl-{workload.pk}", team.namespace)
    assert job.metadata.labels == {"owner": "someone"}


def test_unreachable_cluster_keeps_state_and_says_so(team: Team) -> None:
    dead = Cluster.objects.create(name="dead", kubeconfig_path=_dead_kubeconfig(team))
    workload = admitted(team, cluster=dead)
    with pytest.raises(ClusterUnreachable):
        services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED
    assert workload.last_reason == services.UNREACHABLE_REASON


def _dead_kubeconfig(team: Team) -> str:
    import tempfile

    import yaml

    path = tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False)  # noqa: SIM115
    yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "dead",
                    "cluster": {
                        "server": f"https://127.0.0.1:{free_port()}",
                        "insecure-skip-tls-verify": True,
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": "x"}}],
            "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
            "current-context": "dead",
        },
        path,
    )
    path.close()
    return path.name


def test_submitted_workloads_are_scheduled_placed_and_run_on_the_cluster(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    """submit → scheduling cycle (placement) → reconcile → pods on the chosen node → running."""
    from apps.scheduling.services import scheduling_cycle_run
    from apps.workloads.request import WorkloadRequest
    from apps.workloads.services import workload_submit

    timeslice = GpuClass.objects.create(
        name="L40S",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
        capacity_gpus=8,
    )
    TeamQuotaFactory(team=team, gpu_class=timeslice, guaranteed_milli=2000, limit_milli=4000)
    services.cluster_inventory_sync(cluster=cluster)
    owner = UserFactory()
    team.memberships.create(user=owner)
    workload = workload_submit(
        actor=owner,
        team=team,
        gpu_class=timeslice,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name="tiny",
            gpu_milli=250,
            command=["python", "train.py"],
            params={"pod_annotations": {"kubesim.io/run-duration": "30s"}},
        ),
    )
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    node = workload.placement["replicas"][0]["node"]
    assert node.startswith("l40s-ts-")
    services.workload_reconcile(workload_id=workload.pk)

    def running() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    wait_for(running, timeout=40)
    pods = (
        k8s.CoreV1Api(kube_api_client)
        .list_namespaced_pod(team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
        .items
    )
    assert [p.spec.node_name for p in pods] == [node]
    assert pods[0].spec.containers[0].resources.limits["nvidia.com/gpu.shared"] == "1"


def test_notebook_runs_with_home_volume_kept_on_suspend(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api, kube_api_client: Any
) -> None:
    image = ImageFactory(
        name="nb", kind="notebook", reference="quay.io/jupyter/base-notebook:2024-12-02"
    )
    workload = admitted(
        team, kind=wl.KIND_NOTEBOOK, priority_class="development", image=image, params={}
    )
    services.workload_reconcile(workload_id=workload.pk)
    secret = core_api.read_namespaced_secret(f"wl-{workload.pk}-token", team.namespace)
    assert secret.data["token"]
    claim = services.workload_spec(workload).home_claim
    assert core_api.read_namespaced_persistent_volume_claim(claim, team.namespace)

    def running() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    try:
        wait_for(running, timeout=40)
    except AssertionError:
        raise AssertionError(f"notebook not running: {workload.last_reason}") from None
    # Suspend: objects go, the home volume stays.
    Workload.objects.filter(pk=workload.pk).update(state=wl.SUSPENDED)
    services.workload_reconcile(workload_id=workload.pk)
    apps = k8s.AppsV1Api(kube_api_client)
    wait_for(
        lambda: not apps.list_namespaced_stateful_set(
            team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ).items
    )
    assert core_api.read_namespaced_persistent_volume_claim(claim, team.namespace)


def test_notebook_ingress_is_guarded_by_the_portal_on_its_own_host_with_tls(
    team: Team, cluster: Cluster, kube_api_client: Any, settings: Any
) -> None:
    from apps.orchestration.notebook_access import notebook_location

    settings.TRAFFIC_API = "ingress"
    settings.NOTEBOOK_WILDCARD_HOST = "*.nb.gpu.example.com"
    settings.NOTEBOOK_TLS_SECRET = "nb-wildcard-cert"
    settings.PORTAL_URL = "https://gpu.example.com"
    settings.NOTEBOOK_AUTH_URL = "http://gpupaas-web.gpupaas.svc/notebooks/auth/"
    image = ImageFactory(
        name="nb", kind="notebook", reference="quay.io/jupyter/base-notebook:2024-12-02"
    )
    workload = admitted(
        team, kind=wl.KIND_NOTEBOOK, priority_class="development", image=image, params={}
    )
    services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    stored = next(r for r in workload.k8s_objects if r["kind"] == "Ingress")
    ingress = k8s.NetworkingV1Api(kube_api_client).read_namespaced_ingress(
        stored["name"], team.namespace
    )
    host = f"{stored['name']}.nb.gpu.example.com"
    assert ingress.metadata.annotations == {
        "nginx.ingress.kubernetes.io/auth-url": "http://gpupaas-web.gpupaas.svc/notebooks/auth/",
        "nginx.ingress.kubernetes.io/auth-signin": "https://gpu.example.com/notebooks/signin/",
        "nginx.ingress.kubernetes.io/auth-method": "GET",
        "nginx.ingress.kubernetes.io/auth-response-headers": "Authorization",
    }
    assert [rule.host for rule in ingress.spec.rules] == [host]
    path = ingress.spec.rules[0].http.paths[0]
    assert path.path == f"/notebooks/{team.namespace}/{workload.pk}/"
    assert path.backend.service.name == next(
        r["name"] for r in workload.k8s_objects if r["kind"] == "Service"
    )
    assert [(t.hosts, t.secret_name) for t in ingress.spec.tls] == [([host], "nb-wildcard-cert")]
    # The portal sends the browser to the host the cluster serves.
    location = notebook_location(workload)
    assert location is not None and location.host == host


def test_notebook_route_is_an_httproute_on_the_gateway_guarded_by_forward_auth(
    team: Team, cluster: Cluster, kube_api_client: Any, settings: Any
) -> None:
    """Gateway API by default: the notebook's HTTPRoute on the platform's Gateway (its own host
    under the wildcard), the portal's route-bound auth address in Traefik's forwardAuth beside
    it; the API server (the Gateway API v1.6.3 CRDs) accepts both; a route deleted by hand is
    back after a reconcile; both go with the notebook."""
    from apps.orchestration.notebook_access import notebook_location

    settings.TRAFFIC_API = "gateway-api"
    settings.GATEWAY_NAME, settings.GATEWAY_NAMESPACE = "gpupaas", "gpupaas-gateway"
    settings.GATEWAY_IMPLEMENTATION = "traefik"
    settings.NOTEBOOK_WILDCARD_HOST = "*.nb.gpu.example.com"
    settings.PORTAL_URL = "https://gpu.example.com"
    settings.NOTEBOOK_AUTH_URL = "http://gpupaas-web.gpupaas.svc/notebooks/auth/"
    image = ImageFactory(
        name="nb", kind="notebook", reference="quay.io/jupyter/base-notebook:2024-12-02"
    )
    workload = admitted(
        team, kind=wl.KIND_NOTEBOOK, priority_class="development", image=image, params={}
    )
    services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    kinds = {r["kind"] for r in workload.k8s_objects}
    assert {"HTTPRoute", "Middleware"} <= kinds and "Ingress" not in kinds
    custom = k8s.CustomObjectsApi(kube_api_client)
    name = next(r["name"] for r in workload.k8s_objects if r["kind"] == "HTTPRoute")
    route = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", name
    )
    host = f"{name}.nb.gpu.example.com"
    assert route["spec"]["hostnames"] == [host]
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "namespace": "gpupaas-gateway",
            "name": "gpupaas",
        }
    ]
    rule = route["spec"]["rules"][0]
    assert rule["matches"] == [
        {"path": {"type": "PathPrefix", "value": f"/notebooks/{team.namespace}/{workload.pk}"}}
    ]
    assert rule["filters"] == [
        {
            "type": "ExtensionRef",
            "extensionRef": {"group": "traefik.io", "kind": "Middleware", "name": f"{name}-auth"},
        }
    ]
    middleware = custom.get_namespaced_custom_object(
        "traefik.io", "v1alpha1", team.namespace, "middlewares", f"{name}-auth"
    )
    assert middleware["spec"]["forwardAuth"] == {
        "address": f"http://gpupaas-web.gpupaas.svc/notebooks/auth/{workload.pk}/",
        "trustForwardHeader": False,
        "authResponseHeaders": ["Authorization"],
        "addAuthCookiesToResponse": [f"gpupaas-nb-{workload.pk}"],
    }
    location = notebook_location(workload)
    assert location is not None and location.host == host
    # Deleted by hand: the next reconcile puts it back.
    custom.delete_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", name
    )
    services.workload_reconcile(workload_id=workload.pk)
    assert custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", name
    )["spec"]["hostnames"] == [host]
    # Gone with the notebook.
    Workload.objects.filter(pk=workload.pk).update(state=wl.CANCELLED)
    services.workload_reconcile(workload_id=workload.pk)
    for group, version, plural in (
        ("gateway.networking.k8s.io", "v1", "httproutes"),
        ("traefik.io", "v1alpha1", "middlewares"),
    ):
        items = custom.list_namespaced_custom_object(
            group,
            version,
            team.namespace,
            plural,
            label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}",
        )["items"]
        assert items == []


def test_a_teams_unknown_endpoint_and_notebook_routes_are_made_and_kept_by_drift_repair(
    team: Team, cluster: Cluster, kube_api_client: Any, settings: Any
) -> None:
    """With endpoints on the Gateway, a team namespace holds the route (and its Service and
    forwardAuth) that answers for endpoint ids that do not exist; the API server accepts them,
    drift repair adds them where they are missing and puts back one deleted by hand, and finds
    nothing to do once they are there."""
    settings.TRAFFIC_API = "gateway-api"
    settings.GATEWAY_NAME, settings.GATEWAY_NAMESPACE = "gpupaas", "gpupaas-gateway"
    settings.GATEWAY_IMPLEMENTATION = "traefik"
    settings.ENDPOINT_HOST = "serve.gpu.example.com"
    settings.ENDPOINT_AUTH_URL = "http://gpupaas-web.gpupaas.svc/endpoints/auth/"
    settings.NOTEBOOK_HOST, settings.NOTEBOOK_WILDCARD_HOST = "notebooks.gpu.example.com", ""
    settings.NOTEBOOK_AUTH_URL = "http://gpupaas-web.gpupaas.svc/notebooks/auth/"
    custom = k8s.CustomObjectsApi(kube_api_client)
    name = "gpupaas-unknown-endpoint"
    notebooks = "gpupaas-unknown-notebook"

    first = services.drift_repair_pass(cluster=cluster)
    made = {(a.kind, a.name) for a in first.repaired if a.namespace == team.namespace}
    for each in (name, notebooks):
        assert {("Service", each), ("HTTPRoute", each), ("Middleware", each)} <= made, first
    notebook_route = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", notebooks
    )
    assert notebook_route["spec"]["hostnames"] == ["notebooks.gpu.example.com"]
    assert notebook_route["spec"]["rules"][0]["matches"][0]["path"]["value"] == (
        f"/notebooks/{team.namespace}"
    )
    route = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", name
    )
    assert route["spec"]["hostnames"] == ["serve.gpu.example.com"]
    assert route["spec"]["rules"][0]["matches"][0]["path"]["value"] == (
        f"/endpoints/{team.namespace}"
    )
    middleware = custom.get_namespaced_custom_object(
        "traefik.io", "v1alpha1", team.namespace, "middlewares", name
    )
    assert middleware["spec"]["forwardAuth"]["address"] == (
        "http://gpupaas-web.gpupaas.svc/endpoints/auth/0/"
    )
    again = services.drift_repair_pass(cluster=cluster)
    assert not [a for a in again.repaired if a.namespace == team.namespace], again
    custom.delete_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", name
    )
    restored = services.drift_repair_pass(cluster=cluster)
    assert ("HTTPRoute", name) in {(a.kind, a.name) for a in restored.repaired}
    assert restored.failed == []


def test_logs_tail_and_follow_come_from_the_cluster(team: Team, cluster: Cluster) -> None:
    from apps.orchestration.cluster_reads import LogsUnavailable, workload_events, workload_logs

    workload = admitted(team, params={"pod_annotations": {"kubesim.io/run-duration": "4s"}})
    with pytest.raises(LogsUnavailable, match="No pod"):
        list(workload_logs(workload=workload))
    services.workload_reconcile(workload_id=workload.pk)

    def running() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    wait_for(running, timeout=40)
    time.sleep(1.5)
    lines = list(workload_logs(workload=workload, tail_lines=1))
    assert len(lines) == 1
    assert f"wl-{workload.pk}" in lines[0]
    followed = list(workload_logs(workload=workload, follow=True, tail_lines=100))
    assert "started nvcr.io/nvidia/pytorch:24.12-py3" in followed[0]
    assert followed[-1].endswith("exited with code 0")
    reasons = {e.reason for e in workload_events(workload=workload)}
    assert {"Scheduled", "SuccessfulCreate"} <= reasons


def test_unreachable_cluster_recovers_without_duplicates(
    team: Team, kubesim: Kubesim, kube_api_client: Any
) -> None:
    flaky = Cluster.objects.create(name="flaky", kubeconfig_path=_dead_kubeconfig(team))
    workload = admitted(
        team, cluster=flaky, params={"pod_annotations": {"kubesim.io/run-duration": "1h"}}
    )
    for _ in range(2):
        with pytest.raises(ClusterUnreachable):
            services.workload_reconcile(workload_id=workload.pk)
    # The API server answers again (here: the cluster's address is fixed).
    Cluster.objects.filter(pk=flaky.pk).update(kubeconfig_path=str(kubesim.kubeconfig))
    forget_clients()
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    workload.refresh_from_db()
    assert workload.state == wl.STARTING
    assert workload.last_reason != services.UNREACHABLE_REASON
    assert len(jobs_of(kube_api_client, team, workload)) == 1
