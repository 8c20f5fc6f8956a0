"""Inference endpoints on the simulated cluster, through the real path (rules, scheduler,
reconcile, the Deployment controller, status): deploy, scale up and down, never preempted,
only on the team's guarantee, and a failing rolling update rolled back by itself."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from kubernetes import client as k8s

from apps.accounts.models import Membership, Team, User
from apps.catalog.models import Cluster, GpuClass, Image
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from apps.serving.services import endpoint_scale, endpoint_update
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


@pytest.fixture
def lead(team: Team) -> User:  # noqa: F811 - the fixture
    user = UserFactory()
    team.memberships.create(user=user, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def serving() -> Image:
    return ImageFactory(
        name="vLLM server", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving"
    )


def deploy(
    team: Team,  # noqa: F811 - the fixture
    lead: User,
    image: Image,
    gpu_milli: int = 1000,
    **endpoint: Any,
) -> Workload:
    values = {"model_path": "/team/models/llama", "max_replicas": 4, **endpoint}
    return workload_submit(
        actor=lead,
        team=team,
        gpu_class=GpuClassFactory(),
        image=image,
        request=WorkloadRequest.of(
            kind=wl.KIND_INFERENCE, name="llm", gpu_milli=gpu_milli, endpoint=values
        ),
    )


def apps_api(core: k8s.CoreV1Api) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(core.api_client)


def deployment_of(core: k8s.CoreV1Api, w: Workload) -> Any:
    return apps_api(core).read_namespaced_deployment(f"wl-{w.pk}", w.team.namespace)


def ready_pods(core: k8s.CoreV1Api, w: Workload) -> int:
    pods = core.list_namespaced_pod(
        w.team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={w.pk}"
    ).items
    return sum(
        1
        for p in pods
        if p.status.phase == "Running"
        and p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    )


def converge(w: Workload, on: Cluster, state: str = wl.RUNNING, timeout: float = 40) -> None:
    services.workload_reconcile(workload_id=w.pk)

    def reached() -> bool:
        services.status_sync_pass(cluster=on)
        w.refresh_from_db()
        return w.state == state

    wait_for(reached, timeout=timeout)


def test_an_endpoint_deploys_scales_up_and_down_in_the_production_class(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    lead: User,
    serving: Image,
) -> None:
    services.cluster_inventory_sync(cluster=cluster)
    endpoint = deploy(team, lead, serving, min_replicas=1, port=8080, health_path="/v2/health")
    assert scheduling_cycle_run().admitted == (endpoint.pk,)
    converge(endpoint, cluster)
    deployment = deployment_of(core_api, endpoint)
    assert deployment.spec.replicas == 1
    assert deployment.spec.strategy.rolling_update.max_unavailable == 0
    pod = deployment.spec.template.spec
    assert pod.priority_class_name == "gpupaas-production"
    assert pod.automount_service_account_token is False
    assert pod.security_context.run_as_non_root is True
    probe = pod.containers[0].readiness_probe.http_get
    assert (probe.path, probe.port) == ("/v2/health", 8080)
    assert pod.containers[0].liveness_probe.http_get.path == "/v2/health"
    service = core_api.read_namespaced_service(f"wl-{endpoint.pk}", team.namespace)
    assert service.spec.ports[0].target_port == 8080
    wait_for(lambda: ready_pods(core_api, endpoint) == 1, timeout=30)

    endpoint_scale(actor=lead, workload=endpoint, replicas=3)
    run = scheduling_cycle_run()
    assert run.scaled == (endpoint.pk,)
    endpoint.refresh_from_db()
    assert endpoint.replicas == 3 and endpoint.total_milli == 3000
    assert len(endpoint.placement["replicas"]) == 3
    services.workload_reconcile(workload_id=endpoint.pk)
    wait_for(lambda: ready_pods(core_api, endpoint) == 3, timeout=30)
    services.status_sync_pass(cluster=cluster)
    endpoint.refresh_from_db()
    assert endpoint.last_reason == "3 of 3 replicas ready"

    # The page shows the replicas where the cluster runs them (an endpoint's pods are not
    # pinned to the placed nodes), and how many of those asked run.
    page = Client()
    page.force_login(lead)
    shown = page.get(f"/workloads/{endpoint.pk}/status/").content.decode()
    assert "3 of 3 replicas running, as the cluster says" in shown
    pods = core_api.list_namespaced_pod(
        team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={endpoint.pk}"
    ).items
    rows = re.findall(r'<td class="mono">([^<]+)</td><td>([^<]+)</td>', shown)
    assert sorted(node for node, _ in rows) == sorted(p.spec.node_name for p in pods)
    assert {state for _, state in rows} == {"running"}

    endpoint_scale(actor=lead, workload=endpoint, replicas=1)
    endpoint.refresh_from_db()
    assert endpoint.replicas == 1 and endpoint.total_milli == 1000
    # The periodic pass applies a running endpoint's objects again (had the task been lost).
    assert services.reconcile_pass(cluster=cluster).endpoints_checked == 1
    assert deployment_of(core_api, endpoint).spec.replicas == 1
    wait_for(lambda: ready_pods(core_api, endpoint) == 1, timeout=30)
    with pytest.raises(ValidationError) as too_many:
        endpoint_scale(actor=lead, workload=endpoint, replicas=5)
    assert too_many.value.message_dict == {
        "replicas": ["This endpoint runs between 1 and 4 replicas."]
    }


def test_a_scale_up_above_the_guarantee_waits_with_a_reason(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    lead: User,
    serving: Image,
) -> None:
    # Guarantee 4 GPUs, limit 8: an endpoint of 2 GPUs per replica gets two replicas, never a
    # third on borrowed capacity, even though the limit would allow it.
    services.cluster_inventory_sync(cluster=cluster)
    endpoint = deploy(team, lead, serving, min_replicas=1, gpu_milli=2000)
    scheduling_cycle_run()
    converge(endpoint, cluster)
    endpoint_scale(actor=lead, workload=endpoint, replicas=3)
    run = scheduling_cycle_run()
    assert run.scaled == (endpoint.pk,)
    endpoint.refresh_from_db()
    assert endpoint.replicas == 2
    waiting = endpoint.params["endpoint"]["scale_waiting"]
    assert waiting.startswith("Production work runs only on guaranteed quota: ")
    assert "4 of its 4 GPU guarantee" in waiting
    # Still waiting on the next cycle; the Kubernetes objects say two replicas.
    assert scheduling_cycle_run().scaled == ()
    services.workload_reconcile(workload_id=endpoint.pk)
    assert deployment_of(core_api, endpoint).spec.replicas == 2


def test_a_training_job_cannot_preempt_an_endpoint(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    lead: User,
    serving: Image,
    settings: Any,
) -> None:
    settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = 0
    h100 = GpuClass.objects.get(name="H100-80GB")
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=1000, limit_milli=1000
    )
    services.cluster_inventory_sync(cluster=cluster)
    endpoint = deploy(team, lead, serving, min_replicas=1)
    scheduling_cycle_run()
    converge(endpoint, cluster)
    training = workload_submit(
        actor=lead,
        team=team,
        gpu_class=h100,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind=wl.KIND_TRAINING,
            name="big-run",
            gpu_milli=1000,
            priority_class=wl.PRIORITY_TRAINING,
            command=["python", "train.py"],
        ),
    )
    run = scheduling_cycle_run()
    assert (run.admitted, run.preempted) == ((), ())
    training.refresh_from_db()
    assert training.state == wl.QUEUED
    assert training.last_reason.startswith("Team quota reached")
    services.status_sync_pass(cluster=cluster)
    endpoint.refresh_from_db()
    assert endpoint.state == wl.RUNNING and ready_pods(core_api, endpoint) == 1


def test_a_failing_rolling_update_rolls_back_by_itself(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    lead: User,
    serving: Image,
    settings: Any,
) -> None:
    settings.ENDPOINT_PROGRESS_DEADLINE_SECONDS = 6
    services.cluster_inventory_sync(cluster=cluster)
    endpoint = deploy(team, lead, serving, min_replicas=1)
    scheduling_cycle_run()
    converge(endpoint, cluster)
    wait_for(lambda: ready_pods(core_api, endpoint) == 1, timeout=30)
    (old,) = [
        p.metadata.uid
        for p in core_api.list_namespaced_pod(
            team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={endpoint.pk}"
        ).items
    ]

    endpoint_update(actor=lead, workload=endpoint, env={"MODEL_DTYPE": "fp8"})
    # The new revision's server exits at once and never becomes ready.
    params = endpoint.params
    params["endpoint"]["pod_annotations"] = {
        "kubesim.io/run-duration": "1s",
        "kubesim.io/exit-code": "1",
    }
    Workload.objects.filter(pk=endpoint.pk).update(params=params)
    endpoint.refresh_from_db()
    assert endpoint.params["endpoint"]["rollout"]["state"] == "progressing"
    services.workload_reconcile(workload_id=endpoint.pk)
    assert (
        deployment_of(core_api, endpoint).spec.template.metadata.annotations[m.ANNOTATION_REVISION]
        == "2"
    )

    def rolled_back() -> bool:
        services.status_sync_pass(cluster=cluster)
        endpoint.refresh_from_db()
        return endpoint.params["endpoint"]["rollout"]["state"] != "progressing"

    wait_for(rolled_back, timeout=60)
    rollout = endpoint.params["endpoint"]["rollout"]
    assert rollout["state"] == "rolled back", rollout
    assert endpoint.env == {} and endpoint.params["endpoint"]["revision"] == 3
    assert endpoint.state == wl.RUNNING
    # The old replica served all along (never unavailable), and still does.
    services.workload_reconcile(workload_id=endpoint.pk)
    deployment = deployment_of(core_api, endpoint)
    assert "kubesim.io/exit-code" not in (deployment.spec.template.metadata.annotations or {})
    wait_for(lambda: ready_pods(core_api, endpoint) >= 1, timeout=30)
    assert old in [
        p.metadata.uid
        for p in core_api.list_namespaced_pod(
            team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={endpoint.pk}"
        ).items
    ]
    assert endpoint.events.filter(reason__contains="rolled back to the previous").exists()
