"""Team and personal secrets against the simulated cluster: the values land in a Secret in
the team namespace, pods refer to it by its stored name, and a missing secret is refused at
submit with nothing created."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster, GpuClass
from apps.credentials.models import Secret
from apps.orchestration import credentials, services
from apps.orchestration import manifests as m
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory
from tests.waiting import wait_for
from tests.workloads.submitting import submit_fields

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
VALUE = "hf_kubesim-s3cret"


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
    services.team_namespace_ensure(team=team)
    yield team
    try:
        core_api.delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _decoded(obj: Any) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (obj.data or {}).items()}


def test_secret_is_written_to_the_namespace_used_by_pods_and_removed_on_delete(
    team: Team, cluster: Cluster, core_api: k8s.CoreV1Api
) -> None:
    lead, member = UserFactory(), UserFactory()
    team.memberships.create(user=lead, role=Membership.Role.LEAD)
    team.memberships.create(user=member)
    secret = credentials.secret_create(actor=lead, team=team, name="hf", data={"token": VALUE})
    stored = core_api.read_namespaced_secret(secret.k8s_name, team.namespace)
    assert _decoded(stored) == {"token": VALUE}
    assert stored.metadata.labels[m.LABEL_TEAM] == team.slug
    credentials.secret_rotate(actor=lead, secret=secret, data={"token": VALUE + "-2"})
    rotated = core_api.read_namespaced_secret(secret.k8s_name, team.namespace)
    assert _decoded(rotated) == {"token": VALUE + "-2"}

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
    image = ImageFactory()
    request: dict[str, Any] = {
        "actor": member,
        "team": team,
        "kind": "training",
        "name": "with-secret",
        "gpu_class": timeslice,
        "image": image,
        "gpu_milli": 250,
        "command": ["python", "train.py"],
        "params": {"pod_annotations": {"kubesim.io/run-duration": "30s"}},
    }
    with pytest.raises(ValidationError) as refused:
        submit_fields(**request, secrets=[{"name": "nope", "env": "HF_TOKEN"}])
    assert "No secret named “nope”" in refused.value.message_dict["secrets"][0]
    assert not Workload.objects.exists()

    workload = submit_fields(**request, secrets=[{"name": "hf", "env": "HF_TOKEN"}])
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    services.workload_reconcile(workload_id=workload.pk)

    def pods() -> list[Any]:
        return core_api.list_namespaced_pod(
            team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ).items

    wait_for(lambda: bool(pods()), timeout=40)
    env = {e.name: e for e in pods()[0].spec.containers[0].env}
    ref = env["HF_TOKEN"].value_from.secret_key_ref
    assert (ref.name, ref.key) == (secret.k8s_name, "token")
    assert env["HF_TOKEN"].value is None  # the value is not in the pod spec

    credentials.secret_delete(actor=lead, secret=Secret.objects.get())
    assert credentials.credential_remove(namespace=team.namespace, k8s_name=secret.k8s_name) == 1
    names = [s.metadata.name for s in core_api.list_namespaced_secret(team.namespace).items]
    assert secret.k8s_name not in names
