"""Multi-node training jobs (gangs) on the simulated cluster, through the real path.

submit → scheduling cycle (placement) → reconcile → the cluster's own scheduler and Job
controller. For every shape the placement the scheduler decides and the constraints the
manifests state must agree: each replica on its own node, every pod Running at the same
time, and no FailedScheduling event. A gang with more replicas than one cluster has nodes
for is refused at submit and creates nothing (one that could fit but not now waits: the
scheduling core's tests). A lost replica restarts the whole gang.

The module runs its own cluster, with two or more nodes of every sharing mode (the default
topology has one HAMi node and no MIG layout a whole GPU fits in), so the shapes neither
meet other tests' pods nor wait for them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from apps.accounts.models import Team
from apps.catalog.models import Cluster, GpuClass
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit, workload_transition
from deploy.devtools import kubesim as ks
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory
from tests.plugins.kubesim import admin_kubeconfig, portal_view
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]

TOPOLOGY = """
pools:
  - name: h100
    count: 4
    cpu: "192"
    memory: 2Ti
    gpu: {count: 8, product: NVIDIA-H100-80GB-HBM3, memoryMiB: 81559}
  - name: l40s-ts
    count: 2
    gpu: {count: 4, product: NVIDIA-L40S, memoryMiB: 46068,
          sharing: {mode: time-slicing, replicas: 4}}
  - name: hami
    count: 2
    cpu: "128"
    memory: 1Ti
    gpu: {count: 8, product: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920,
          sharing: {mode: hami, splitCount: 10}}
  - name: a100-mig
    count: 2
    cpu: "128"
    memory: 1Ti
    gpu: {count: 2, product: NVIDIA-A100-SXM4-80GB, memoryMiB: 81920,
          sharing: {mode: mig, migLayout: [7g.80gb]}}
"""

# name → (product label, memory MiB, sharing mode, extra fields, team limit in milli-GPU)
CLASSES: dict[str, tuple[str, int, str, dict[str, Any], int]] = {
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", 81559, "whole", {}, 32_000),
    "L40S-TS": ("NVIDIA-L40S", 46068, "timeslice", {"timeslice_replicas": 4}, 8_000),
    "A100-HAMi": ("NVIDIA-A100-SXM4-80GB", 81920, "hami", {"hami_split_count": 10}, 16_000),
    "A100-MIG": ("NVIDIA-A100-SXM4-80GB", 81920, "mig", {"mig_profiles": ["7g.80gb"]}, 4_000),
}
RUN = {"pod_annotations": {"kubesim.io/run-duration": "10m"}}


@dataclass(frozen=True)
class Shape:
    gpu_class: str
    replicas: int
    gpus: int  # whole GPUs per replica
    fits: bool = True

    @property
    def label(self) -> str:
        return f"{self.gpu_class} {self.replicas}x{self.gpus}"


SHAPES = [
    Shape("H100-80GB", 2, 1),
    Shape("H100-80GB", 2, 4),
    Shape("H100-80GB", 4, 2),
    Shape("H100-80GB", 2, 8),
    Shape("H100-80GB", 4, 8),
    Shape("H100-80GB", 3, 5),
    Shape("L40S-TS", 2, 1),
    Shape("L40S-TS", 2, 4),
    Shape("A100-HAMi", 2, 2),
    Shape("A100-MIG", 2, 1),
    # Five GPUs in all, but five nodes: the class has four.
    Shape("H100-80GB", 5, 1, fits=False),
    Shape("A100-HAMi", 3, 1, fits=False),
]
SPREADS: dict[str, str] = {}


@pytest.fixture(scope="module")
def gang_kubesim(
    kubesim_binary: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ks.Kubesim]:
    data = tmp_path_factory.mktemp("kubesim-gangs")
    topology = data / "gangs.yaml"
    topology.write_text(TOPOLOGY)
    with ks.start(data / "cluster", topology=topology) as cluster:
        yield portal_view(cluster)
    # The start spread of each shape goes in the release notes: show it after the run.
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None and SPREADS:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line("gang shape: first to last pod Running (container startedAt)")
            for label, line in SPREADS.items():
                reporter.write_line(f"  {label:<18} {line}")


@pytest.fixture(scope="module")
def api(gang_kubesim: ks.Kubesim) -> Iterator[k8s.ApiClient]:
    api_client = k8s_config.new_client_from_config(config_file=str(admin_kubeconfig(gang_kubesim)))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def cluster(gang_kubesim: ks.Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="gangs", kubeconfig_path=str(gang_kubesim.kubeconfig))


@pytest.fixture
def team(cluster: Cluster, api: k8s.ApiClient) -> Iterator[Team]:
    team = TeamFactory()
    for name, (product, memory, mode, extra, limit) in CLASSES.items():
        gpu_class = GpuClass.objects.create(
            name=name, product_label=product, memory_mib=memory, sharing_mode=mode, **extra
        )
        TeamQuotaFactory(team=team, gpu_class=gpu_class, guaranteed_milli=limit, limit_milli=limit)
    services.team_namespace_ensure(team=team, clusters=[cluster])
    services.cluster_inventory_sync(cluster=cluster)
    yield team
    # Stop every workload and wait until its pods are gone, so the next shape finds the
    # nodes as empty as the scheduler believes them.
    for workload in Workload.objects.filter(team=team, state__in=wl.ACTIVE_STATES):
        workload_transition(workload=workload, to_state=wl.CANCELLED, reason="test over")
        services.workload_reconcile(workload_id=workload.pk)
    core = k8s.CoreV1Api(api)
    wait_for(lambda: not core.list_namespaced_pod(team.namespace).items, timeout=30)
    core.delete_namespace(team.namespace, propagation_policy="Background")


def submit(team: Team, shape: Shape, **kw: Any) -> Workload:
    owner = UserFactory()
    team.memberships.create(user=owner)
    return workload_submit(
        actor=owner,
        team=team,
        gpu_class=GpuClass.objects.get(name=shape.gpu_class),
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name=f"gang-{shape.replicas}x{shape.gpus}",
            gpu_milli=shape.gpus * 1000,
            replicas=shape.replicas,
            command=["python", "train.py"],
            params=RUN,
            **kw,
        ),
    )


def pods_of(api: k8s.ApiClient, workload: Workload) -> list[Any]:
    return list(
        k8s.CoreV1Api(api)
        .list_namespaced_pod(
            workload.team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        )
        .items
    )


def events(api: k8s.ApiClient, namespace: str, reason: str) -> list[Any]:
    found = k8s.CoreV1Api(api).list_namespaced_event(namespace).items
    return [e for e in found if e.reason == reason]


def started_at(pod: Any) -> datetime:
    (status,) = pod.status.container_statuses
    assert status.state.running is not None, status.state
    return status.state.running.started_at


def run_gang(api: k8s.ApiClient, cluster: Cluster, workload: Workload) -> tuple[list[Any], float]:
    """Reconcile an admitted gang and wait until every replica's pod runs at the same time.

    Returns the pods (seen Running together in one list) and the seconds from creating the
    Job to that moment.
    """
    began = time.monotonic()
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"

    def all_running() -> list[Any]:
        pods = [p for p in pods_of(api, workload) if p.metadata.deletion_timestamp is None]
        together = len(pods) == workload.replicas
        return pods if together and all(p.status.phase == "Running" for p in pods) else []

    pods = wait_for(all_running, timeout=30, every=0.1)
    took = time.monotonic() - began

    def gang_running() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    wait_for(gang_running, timeout=20)
    assert workload.last_reason == f"running: all {workload.replicas} replicas"
    return pods, took


def assert_one_replica_per_placed_node(api: k8s.ApiClient, workload: Workload, pods: Any) -> None:
    placed = [r["node"] for r in workload.placement["replicas"]]
    assert len(set(placed)) == workload.replicas, placed
    nodes = [p.spec.node_name for p in pods]
    assert sorted(nodes) == sorted(placed), (nodes, placed)
    # Pod i is <job>-i under the headless Service: MASTER_ADDR names pod 0.
    name = f"wl-{workload.pk}"
    indexes = sorted(
        int(p.metadata.labels["batch.kubernetes.io/job-completion-index"]) for p in pods
    )
    assert indexes == list(range(workload.replicas))
    for pod in pods:
        index = pod.metadata.labels["batch.kubernetes.io/job-completion-index"]
        assert (pod.spec.hostname, pod.spec.subdomain) == (f"{name}-{index}", name)
        env = {e.name: e.value for e in pod.spec.containers[0].env}
        assert env["MASTER_ADDR"] == f"{name}-0.{name}"
        assert env["NNODES"] == str(workload.replicas)
    service = k8s.CoreV1Api(api).read_namespaced_service(name, workload.team.namespace)
    assert service.spec.cluster_ip == "None"
    # Every pod was scheduled (the events are written in order): none failed first.
    namespace = workload.team.namespace
    wait_for(lambda: len(events(api, namespace, "Scheduled")) >= workload.replicas, timeout=10)
    failed = [e.message for e in events(api, namespace, "FailedScheduling")]
    assert failed == [], failed


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label.replace(" ", "-"))
def test_gang_runs_whole_on_distinct_nodes_or_is_refused_creating_nothing(
    shape: Shape, team: Team, cluster: Cluster, api: k8s.ApiClient
) -> None:
    if not shape.fits:
        # More replicas than the class has nodes for in one cluster: refused at submit with a
        # field message, nothing recorded, nothing on the cluster.
        with pytest.raises(ValidationError) as refused:
            submit(team, shape)
        (message,) = refused.value.message_dict["replicas"]
        assert f"A job of {shape.replicas} replicas runs one replica per node" in message
        assert not Workload.objects.filter(team=team).exists()
        selector = m.LABEL_WORKLOAD
        assert not k8s.BatchV1Api(api).list_namespaced_job(team.namespace).items
        assert not [
            p
            for p in k8s.CoreV1Api(api).list_namespaced_pod(team.namespace).items
            if selector in (p.metadata.labels or {})
        ]
        SPREADS[shape.label] = f"refused at submit: {message}"
        return
    workload = submit(team, shape)
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    pods, took = run_gang(api, cluster, workload)
    assert_one_replica_per_placed_node(api, workload, pods)
    starts = [started_at(p) for p in pods]
    spread = (max(starts) - min(starts)).total_seconds()
    nodes = ", ".join(sorted(p.spec.node_name for p in pods))
    SPREADS[shape.label] = (
        f"all {shape.replicas} Running together on {nodes}; startedAt spread {spread:.0f} s; "
        f"Job created → all Running {took:.1f} s"
    )
    assert spread <= 5, starts


def test_lost_replica_restarts_the_whole_gang(
    team: Team, cluster: Cluster, api: k8s.ApiClient, settings: Any
) -> None:
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = 0
    workload = submit(team, Shape("H100-80GB", 2, 4))
    scheduling_cycle_run()
    workload.refresh_from_db()
    first, _ = run_gang(api, cluster, workload)
    victim = next(
        p for p in first if p.metadata.labels["batch.kubernetes.io/job-completion-index"] == "1"
    )
    k8s.CoreV1Api(api).delete_namespaced_pod(victim.metadata.name, team.namespace)

    def preempted() -> bool:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.PREEMPTED

    wait_for(preempted, timeout=20)
    assert workload.last_reason == (
        f"replica 1 (pod {victim.metadata.name}) was lost: deleted. The gang restarts whole: "
        "back in the queue, then admitted again with all 2 replicas together."
    )
    assert workload.preempted_at is not None
    # The whole gang stops: its Job (and with it the other replica) is deleted.
    wait_for(lambda: not pods_of(api, workload), timeout=20)
    scheduling_cycle_run(now=timezone.now())  # requeued after the (zero) grace period
    workload.refresh_from_db()
    assert workload.state == wl.QUEUED, workload.last_reason
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    again, _ = run_gang(api, cluster, workload)
    assert_one_replica_per_placed_node(api, workload, again)
    assert not {p.metadata.uid for p in again} & {p.metadata.uid for p in first}
    states = list(workload.events.order_by("created_at", "id").values_list("to_state", flat=True))
    assert states[-6:] == [
        wl.RUNNING,
        wl.PREEMPTED,
        wl.QUEUED,
        wl.ADMITTED,
        wl.STARTING,
        wl.RUNNING,
    ]


def test_failing_gang_spends_its_retries_on_whole_restarts_then_fails(
    team: Team, cluster: Cluster, api: k8s.ApiClient, settings: Any
) -> None:
    """A replica failing on its own is a retry after a failure: straight back to the queue
    (never preempted, no preemption grace to wait), admitted again whole once the failed run's
    objects are gone, and failed with the exit code when no retry is left."""
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = 3600  # would hold a preempted gang an hour
    workload = submit(team, Shape("H100-80GB", 2, 1), retries=1)
    failing = {"kubesim.io/run-duration": "1s", "kubesim.io/exit-code": "3"}
    Workload.objects.filter(pk=workload.pk).update(params={"pod_annotations": failing})

    def ended() -> str | None:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state if workload.state in (wl.QUEUED, wl.FAILED) else None

    scheduling_cycle_run()
    services.workload_reconcile(workload_id=workload.pk)
    assert wait_for(ended, timeout=30) == wl.QUEUED
    assert workload.last_reason.startswith("Retry 1 of 1 after a failure: replica ")
    assert re.search(
        r"failed: container main exited with code 3( \(Error\))?\. The gang restarts whole",
        workload.last_reason,
    ), workload.last_reason
    assert workload.exit_code == 3
    # The failed run's objects went with the status update; admitted again at the next cycle,
    # whatever the preemption grace.
    assert workload.k8s_objects == []
    wait_for(lambda: not pods_of(api, workload), timeout=20)
    scheduling_cycle_run()
    workload.refresh_from_db()
    assert workload.state == wl.ADMITTED, workload.last_reason
    services.workload_reconcile(workload_id=workload.pk)
    assert wait_for(ended, timeout=30) == wl.FAILED
    # From the failed pod ("… (Error)") or, when the watch saw the Job's condition first and
    # the pod no longer, from the condition: the same words, less the container's reason.
    assert re.fullmatch(
        r"failed: replica \d \(pod \S+\) failed: container main exited with code 3( \(Error\))?",
        workload.last_reason,
    ), workload.last_reason
    assert workload.exit_code == 3
    states = list(workload.events.order_by("created_at", "id").values_list("to_state", flat=True))
    assert wl.PREEMPTED not in states
    assert states.count(wl.QUEUED) == 2  # submitted, then the retry
    wait_for(lambda: not pods_of(api, workload), timeout=20)
