"""Proof that kubesim runs a real control plane: scheduler, admission, controllers, GC.

Everything goes through the official ``kubernetes`` client against the cluster started by the
``kubesim`` fixture (tests/plugins/kubesim.py) with the default topology.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.kubesim

T = TypeVar("T")

WHOLE_GPU_NODES = {"kubesim.io/sharing-mode": "whole"}
POD_CIDR = ipaddress.ip_network("10.244.0.0/16")
needs_default_topology = pytest.mark.skipif(
    bool(os.environ.get("KUBESIM_TOPOLOGY")),
    reason="expectations are written against deploy/kubesim/topologies/default.yaml",
)


def wait_for(
    fetch: Callable[[], T], ok: Callable[[T], bool], what: str, timeout: float = 60.0
) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {value}")
        time.sleep(0.25)


def gpu_pod(
    name: str,
    resources: dict[str, str],
    *,
    node_selector: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, annotations=annotations),
        spec=client.V1PodSpec(
            restart_policy="Never",
            node_selector=node_selector,
            priority_class_name=priority_class,
            termination_grace_period_seconds=30,
            containers=[
                client.V1Container(
                    name="main",
                    image="registry.invalid/cuda:12",
                    resources=client.V1ResourceRequirements(limits=resources),
                )
            ],
        ),
    )


def gpu_job(
    name: str, annotations: dict[str, str], *, parallelism: int = 1, backoff_limit: int = 0
) -> client.V1Job:
    template = gpu_pod("", {"nvidia.com/gpu": "1"}, node_selector=WHOLE_GPU_NODES)
    template.metadata = client.V1ObjectMeta(annotations=annotations)
    return client.V1Job(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1JobSpec(
            parallelism=parallelism,
            completions=parallelism,
            backoff_limit=backoff_limit,
            template=client.V1PodTemplateSpec(metadata=template.metadata, spec=template.spec),
        ),
    )


def condition(obj: Any, type_: str) -> Any:
    for cond in obj.status.conditions or []:
        if cond.type == type_:
            return cond
    return None


def is_gone(read: Callable[[], object]) -> bool:
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


@pytest.fixture
def core(kube_api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api_client)


@pytest.fixture
def batch(kube_api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube_api_client)


@pytest.fixture
def priority_classes(kube_api_client: client.ApiClient) -> Iterator[Callable[[int], str]]:
    api = client.SchedulingV1Api(kube_api_client)
    created: list[str] = []

    def make(value: int) -> str:
        name = f"kubesim-test-{value}-{uuid.uuid4().hex[:8]}"
        api.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=name), value=value)
        )
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            api.delete_priority_class(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def test_pod_asking_for_more_gpus_than_any_node_has_stays_pending_unschedulable(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_pod(
        k8s_namespace, gpu_pod("too-big", {"nvidia.com/gpu": "9"}, node_selector=WHOLE_GPU_NODES)
    )

    pod = wait_for(
        lambda: core.read_namespaced_pod("too-big", k8s_namespace),
        lambda p: condition(p, "PodScheduled") is not None,
        "the scheduler to report on the pod",
    )

    scheduled = condition(pod, "PodScheduled")
    assert scheduled.status == "False"
    assert scheduled.reason == "Unschedulable"
    assert "nvidia.com/gpu" in scheduled.message
    assert pod.status.phase == "Pending"
    assert pod.spec.node_name is None


def test_resource_quota_of_8_gpus_rejects_the_9th_gpu_at_admission(
    core: client.CoreV1Api, k8s_namespace: str
) -> None:
    core.create_namespaced_resource_quota(
        k8s_namespace,
        client.V1ResourceQuota(
            metadata=client.V1ObjectMeta(name="gpus"),
            spec=client.V1ResourceQuotaSpec(hard={"requests.nvidia.com/gpu": "8"}),
        ),
    )
    wait_for(
        lambda: core.read_namespaced_resource_quota("gpus", k8s_namespace),
        lambda q: bool(q.status and q.status.hard),
        "the quota controller to fill in the quota status",
    )
    # Pinned to a pool that does not exist: counts against the quota, holds no real GPUs.
    nowhere = {"kubesim.io/pool": "does-not-exist"}
    core.create_namespaced_pod(
        k8s_namespace, gpu_pod("eight", {"nvidia.com/gpu": "8"}, node_selector=nowhere)
    )

    with pytest.raises(ApiException) as excinfo:
        core.create_namespaced_pod(
            k8s_namespace, gpu_pod("ninth", {"nvidia.com/gpu": "1"}, node_selector=nowhere)
        )

    assert excinfo.value.status == 403
    assert "exceeded quota" in excinfo.value.body
    assert "requests.nvidia.com/gpu" in excinfo.value.body


def _gpus_in_use(core: client.CoreV1Api, node: str) -> int:
    used = 0
    for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        if pod.status.phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers:
            resources = container.resources
            amount = (resources.limits or {}).get("nvidia.com/gpu") or (
                resources.requests or {}
            ).get("nvidia.com/gpu")
            used += int(amount or 0)
    return used


def _least_busy_whole_gpu_node(core: client.CoreV1Api, need: int = 2) -> tuple[str, int]:
    """(name, free GPUs) of the whole-GPU node with the most free GPUs, waiting (up to 2
    minutes) for one with ``need`` free while other tests' namespaces are being deleted."""

    def best() -> tuple[str, int]:
        nodes = core.list_node(label_selector="kubesim.io/sharing-mode=whole").items
        free = {
            n.metadata.name: int(n.status.allocatable["nvidia.com/gpu"])
            - _gpus_in_use(core, n.metadata.name)
            for n in nodes
        }
        name = max(sorted(free), key=lambda n: free[n])
        return name, free[name]

    try:
        return wait_for(best, lambda b: b[1] >= need, f"a whole-GPU node with {need} free", 120)
    except AssertionError:
        return best()


def test_higher_priority_pod_preempts_lower_priority_pods_through_the_scheduler(
    core: client.CoreV1Api,
    k8s_namespace: str,
    priority_classes: Callable[[int], str],
) -> None:
    # The victims get the lowest priority in the cluster, and the preemptor asks for exactly
    # the GPUs they hold, so pods of other tests on the node are never chosen as victims.
    low, high = priority_classes(-1000), priority_classes(1000)
    node, free = _least_busy_whole_gpu_node(core)
    assert free >= 2, f"need a whole-GPU node with 2 free GPUs, best is {node} with {free}"
    on_node = {"kubernetes.io/hostname": node}
    for name, gpus in (("low-a", free // 2), ("low-b", free - free // 2)):
        core.create_namespaced_pod(
            k8s_namespace,
            gpu_pod(name, {"nvidia.com/gpu": str(gpus)}, node_selector=on_node, priority_class=low),
        )
    for name in ("low-a", "low-b"):
        wait_for(
            functools.partial(core.read_namespaced_pod, name, k8s_namespace),
            lambda p: p.status.phase == "Running",
            f"{name} to run",
        )
    assert _gpus_in_use(core, node) == int(
        core.read_node(node).status.allocatable["nvidia.com/gpu"]
    )

    core.create_namespaced_pod(
        k8s_namespace,
        gpu_pod("high", {"nvidia.com/gpu": str(free)}, node_selector=on_node, priority_class=high),
    )

    high_pod = wait_for(
        lambda: core.read_namespaced_pod("high", k8s_namespace),
        lambda p: p.status.phase == "Running",
        "the high-priority pod to run",
    )
    assert high_pod.spec.node_name == node
    assert high_pod.spec.priority == 1000
    for name in ("low-a", "low-b"):
        assert is_gone(functools.partial(core.read_namespaced_pod, name, k8s_namespace))
    events = wait_for(
        lambda: core.list_namespaced_event(k8s_namespace).items,
        lambda evs: {e.involved_object.name for e in evs if e.reason == "Preempted"}
        >= {"low-a", "low-b"},
        "Preempted events for both victims",
    )
    reporters = {
        e.reporting_component or (e.source and e.source.component)
        for e in events
        if e.reason == "Preempted"
    }
    assert reporters == {"default-scheduler"}


def test_job_pods_run_then_complete_and_the_job_is_complete(
    core: client.CoreV1Api, batch: client.BatchV1Api, k8s_namespace: str
) -> None:
    batch.create_namespaced_job(
        k8s_namespace, gpu_job("train", {"kubesim.io/run-duration": "2s"}, parallelism=2)
    )

    pods = wait_for(
        lambda: core.list_namespaced_pod(k8s_namespace, label_selector="job-name=train").items,
        lambda ps: len(ps) == 2 and all(p.status.phase == "Running" for p in ps),
        "both job pods to run",
        timeout=120,  # behind other tests' pods still being deleted, on a busy machine
    )
    for pod in pods:
        assert ipaddress.ip_address(pod.status.pod_ip) in POD_CIDR
        assert pod.status.container_statuses[0].state.running is not None

    job = wait_for(
        lambda: batch.read_namespaced_job("train", k8s_namespace),
        lambda j: condition(j, "Complete") is not None,
        "the Job to complete",
    )
    assert condition(job, "Complete").status == "True"
    assert job.status.succeeded == 2
    assert job.status.failed in (None, 0)
    finished = core.list_namespaced_pod(k8s_namespace, label_selector="job-name=train").items
    for pod in finished:
        assert pod.status.phase == "Succeeded"
        terminated = pod.status.container_statuses[0].state.terminated
        assert terminated.exit_code == 0
        assert (terminated.finished_at - pod.status.start_time).total_seconds() >= 1.5


def test_pod_with_exit_code_annotation_fails_and_the_job_fails(
    core: client.CoreV1Api, batch: client.BatchV1Api, k8s_namespace: str
) -> None:
    batch.create_namespaced_job(
        k8s_namespace,
        gpu_job("crash", {"kubesim.io/run-duration": "1s", "kubesim.io/exit-code": "3"}),
    )

    job = wait_for(
        lambda: batch.read_namespaced_job("crash", k8s_namespace),
        lambda j: condition(j, "Failed") is not None,
        "the Job to fail",
    )

    assert condition(job, "Failed").status == "True"
    assert condition(job, "Failed").reason == "BackoffLimitExceeded"
    assert job.status.failed == 1
    pods = core.list_namespaced_pod(k8s_namespace, label_selector="job-name=crash").items
    assert len(pods) == 1
    assert pods[0].status.phase == "Failed"
    assert pods[0].status.container_statuses[0].state.terminated.exit_code == 3


def test_deleting_a_namespace_removes_its_jobs_and_running_pods(
    core: client.CoreV1Api, batch: client.BatchV1Api, k8s_namespace: str
) -> None:
    batch.create_namespaced_job(
        k8s_namespace, gpu_job("long", {"kubesim.io/run-duration": "1h"}, parallelism=2)
    )
    core.create_namespaced_pod(
        k8s_namespace, gpu_pod("notebook", {"nvidia.com/gpu": "1"}, node_selector=WHOLE_GPU_NODES)
    )
    wait_for(
        lambda: core.list_namespaced_pod(k8s_namespace).items,
        lambda ps: len(ps) == 3 and all(p.status.phase == "Running" for p in ps),
        "the job pods and the notebook pod to run",
    )

    core.delete_namespace(k8s_namespace)

    wait_for(
        lambda: is_gone(lambda: core.read_namespace(k8s_namespace)),
        bool,
        "the namespace to be deleted",
        timeout=90,
    )
    assert batch.list_namespaced_job(k8s_namespace).items == []
    assert core.list_namespaced_pod(k8s_namespace).items == []


@needs_default_topology
def test_nodes_carry_gpu_operator_labels_and_extended_resources_per_sharing_mode(
    core: client.CoreV1Api,
) -> None:
    nodes = {n.metadata.name: n for n in core.list_node().items}
    assert len(nodes) == 9

    h100 = nodes["h100-0"]
    assert h100.metadata.labels["nvidia.com/gpu.present"] == "true"
    assert h100.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert h100.metadata.labels["nvidia.com/gpu.count"] == "8"
    assert h100.metadata.labels["nvidia.com/gpu.memory"] == "81559"
    assert h100.status.allocatable["nvidia.com/gpu"] == "8"

    mig = nodes["a100-mig-0"]
    assert mig.metadata.labels["nvidia.com/mig.strategy"] == "mixed"
    assert mig.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert mig.status.allocatable["nvidia.com/mig-1g.10gb"] == "16"
    assert mig.status.allocatable["nvidia.com/mig-2g.20gb"] == "8"
    assert mig.status.allocatable["nvidia.com/mig-3g.40gb"] == "8"
    assert "nvidia.com/gpu" not in mig.status.allocatable
    assert len(json.loads(mig.metadata.annotations["kubesim.io/mig-devices"])) == 32

    shared = nodes["l40s-ts-0"]
    assert shared.metadata.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert shared.metadata.labels["nvidia.com/gpu.replicas"] == "4"
    assert shared.metadata.labels["nvidia.com/gpu.count"] == "4"
    assert shared.status.allocatable["nvidia.com/gpu.shared"] == "16"

    hami = nodes["hami-0"]
    assert hami.status.allocatable["nvidia.com/gpu"] == "80"
    assert hami.status.allocatable["nvidia.com/gpumem"] == str(8 * 81920)
    assert hami.status.allocatable["nvidia.com/gpucores"] == "800"

    uuids = json.loads(h100.metadata.annotations["kubesim.io/gpu-uuids"])
    assert len(uuids) == 8
    assert len(set(uuids)) == 8
    assert all(u.startswith("GPU-") and len(u) == 40 for u in uuids)
    other = json.loads(nodes["h100-1"].metadata.annotations["kubesim.io/gpu-uuids"])
    assert not set(uuids) & set(other)


@needs_default_topology
@pytest.mark.parametrize(
    ("resource", "pool"),
    [
        ("nvidia.com/mig-3g.40gb", "a100-mig"),
        ("nvidia.com/gpu.shared", "l40s-ts"),
        ("nvidia.com/gpumem", "hami"),
    ],
)
def test_pods_requesting_shared_gpu_resources_land_on_the_matching_pool(
    core: client.CoreV1Api, k8s_namespace: str, resource: str, pool: str
) -> None:
    core.create_namespaced_pod(k8s_namespace, gpu_pod("shared", {resource: "1"}))

    pod = wait_for(
        lambda: core.read_namespaced_pod("shared", k8s_namespace),
        lambda p: p.status.phase == "Running",
        "the pod to run",
    )

    node = core.read_node(pod.spec.node_name)
    assert node.metadata.labels["kubesim.io/pool"] == pool


def test_nodes_stay_ready_past_the_lease_duration_because_leases_are_renewed(
    kube_api_client: client.ApiClient,
) -> None:
    core = client.CoreV1Api(kube_api_client)
    leases = client.CoordinationV1Api(kube_api_client)
    node_name = core.list_node().items[0].metadata.name
    first = leases.read_namespaced_lease(node_name, "kube-node-lease")
    assert first.spec.holder_identity == node_name
    duration = first.spec.lease_duration_seconds
    assert duration == 40

    renewed = wait_for(
        lambda: leases.read_namespaced_lease(node_name, "kube-node-lease"),
        lambda lease: lease.spec.renew_time > first.spec.renew_time,
        "the lease to be renewed",
        timeout=20,
    )
    assert renewed.spec.renew_time > first.spec.renew_time

    # Wait until the cluster is older than the lease duration, then every node is still Ready.
    oldest = min(n.metadata.creation_timestamp for n in core.list_node().items)
    age = (datetime.now(UTC) - oldest).total_seconds()
    if age < duration + 5:
        time.sleep(duration + 5 - age)
    for node in core.list_node().items:
        ready = condition(node, "Ready")
        assert ready is not None
        assert ready.status == "True", node.metadata.name
        taints = {t.key for t in node.spec.taints or []}
        assert not taints & {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}
