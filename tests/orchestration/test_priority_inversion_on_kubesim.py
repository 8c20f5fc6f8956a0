"""No priority inversion, on the simulated cluster, as it was found from outside: a lead's
training job preempted a teammate's 8-GPU notebook (development class); during the notebook's
grace period the 8 freed GPUs went to a queued batch job, and the requeued notebook waited
until it could preempt that batch job after its minimum runtime.

Here the fleet is one free 8-GPU node (the other H100 nodes cordoned), so GPUs, not quota, are
what is short. The capacity the preemption frees belongs to the training job from the moment
of the decision, through the grace period; the batch job gets none of it; and when the
training job ends, the requeued notebook starts ahead of the batch job, which has waited
longer but is of a lower class.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster
from apps.orchestration import services
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_cancel, workload_submit
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.orchestration.test_preemption_on_kubesim import pods_of, run_until
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
GRACE = 3
H100 = ("h100-0", "h100-1", "h100-2", "h100-3")


def gpus_in_use(api: k8s.CoreV1Api, node: str) -> int:
    """GPUs the pods left on ``node`` hold (earlier tests share the cluster, not the database)."""
    pods = api.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    return sum(
        int((c.resources.limits or {}).get("nvidia.com/gpu", 0))
        for p in pods
        if p.status.phase not in ("Succeeded", "Failed")
        for c in p.spec.containers
        if c.resources
    )


@pytest.fixture
def one_node(
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
) -> Iterator[str]:
    """One H100 node with all its GPUs free takes work; the others are cordoned."""
    free = wait_for(
        lambda: next((n for n in H100 if gpus_in_use(core_api, n) == 0), None), timeout=60
    )
    others = [n for n in H100 if n != free]
    for node in others:
        core_api.patch_node(node, {"spec": {"unschedulable": True}})
    services.cluster_inventory_sync(cluster=cluster)
    yield free
    for node in others:
        core_api.patch_node(node, {"spec": {"unschedulable": None}})
    services.cluster_inventory_sync(cluster=cluster)


def eight_gpus(team: Team, actor: Any, name: str, priority: str, runs: str) -> Workload:  # noqa: F811
    return workload_submit(
        actor=actor,
        team=team,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name=name,
            gpu_milli=8000,
            priority_class=priority,
            command=["python", "train.py"],
            params={"pod_annotations": {"kubesim.io/run-duration": runs}},
        ),
    )


def test_gpus_freed_by_a_preemption_go_to_its_beneficiary_and_the_victim_stays_ahead_of_batch(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    one_node: str,
    settings: Any,
) -> None:
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = GRACE
    settings.SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS = 0
    settings.SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = 0
    h100 = GpuClassFactory()
    # Quota for two 8-GPU jobs: the one free node is what is short.
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=16000, limit_milli=16000
    )
    member, lead = UserFactory(), UserFactory()
    team.memberships.create(user=member)
    team.memberships.create(user=lead, role=Membership.Role.LEAD)

    notebook = eight_gpus(team, member, "notebook", wl.PRIORITY_DEVELOPMENT, "30m")
    assert scheduling_cycle_run().admitted == (notebook.pk,)
    services.workload_reconcile(workload_id=notebook.pk)
    run_until(notebook, cluster, wl.RUNNING)
    batch = eight_gpus(team, member, "batch", wl.PRIORITY_BATCH, "30m")
    assert batch.pk not in scheduling_cycle_run().admitted  # no GPU free

    training = eight_gpus(team, lead, "lead-training", wl.PRIORITY_TRAINING, "4s")
    now = timezone.now()
    run = scheduling_cycle_run(now=now)
    assert run.preempted == (notebook.pk,) and run.admitted == (training.pk,)
    services.workload_reconcile(workload_id=notebook.pk)  # the notebook's pods go

    # Through the grace period, cycle after cycle: the freed GPUs are the training job's.
    for second in range(GRACE + 1):
        cycle = scheduling_cycle_run(now=now + timedelta(seconds=second))
        assert batch.pk not in cycle.admitted, second
    batch.refresh_from_db()
    assert batch.state in (wl.PENDING, wl.QUEUED), batch.state
    wait_for(lambda: not pods_of(core_api, notebook), timeout=30)
    assert wait_for(
        lambda: services.workload_reconcile(workload_id=training.pk) == "ensured", timeout=30
    )
    run_until(training, cluster, wl.RUNNING)
    (pod,) = pods_of(core_api, training)
    assert pod.spec.node_name == one_node

    # The notebook is back in the queue, ahead of the batch job that waited longer.
    notebook.refresh_from_db()
    assert notebook.state == wl.QUEUED, notebook.state
    run_until(training, cluster, wl.SUCCEEDED)
    again = scheduling_cycle_run()
    assert again.admitted == (notebook.pk,), (notebook.last_reason, batch.last_reason)
    batch.refresh_from_db()
    assert batch.state == wl.QUEUED
    services.workload_reconcile(workload_id=notebook.pk)
    run_until(notebook, cluster, wl.RUNNING)
    for workload in (notebook, batch):
        workload_cancel(actor=member, workload=workload)
        services.workload_reconcile(workload_id=workload.pk)
    wait_for(lambda: not pods_of(core_api, notebook), timeout=30)
