"""A retry after a failure goes straight back to the queue (no preemption, no grace period),
and is admitted again only once its failed run's objects are gone from the cluster."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.catalog.models import Cluster
from apps.orchestration.selectors import restart_count
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads import core
from apps.workloads.services import workload_transition
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

JOB = [{"kind": "Job", "namespace": "team-vision", "name": "wl-1"}]


def waiting_ids() -> set[int]:
    snapshot = scheduling_snapshot(now=timezone.now(), half_life_seconds=3600)
    return {w.id for w in snapshot.waiting}


def test_a_retry_waits_for_its_failed_runs_objects_to_go_then_queues_like_any(
    cast: Cast,
) -> None:
    cluster = Cluster.objects.create(name="sim", kubeconfig_path="/nowhere")
    run = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        kind=core.KIND_TRAINING,
        replicas=2,
        state=core.RUNNING,
        cluster=cluster,
        k8s_objects=JOB,
    )
    assert workload_transition(
        workload=run,
        to_state=core.QUEUED,
        reason="Retry 1 of 1 after a failure: replica 1 failed.",
        expected_from=core.RUNNING,
        extra={"placement": {}, "exit_code": 3},
    )
    run.refresh_from_db()
    assert (run.state, run.exit_code, run.cluster_id) == (core.QUEUED, 3, cluster.pk)
    assert run.pk not in waiting_ids()  # its old Job is still recorded: not admitted yet
    run.k8s_objects = []
    run.save(update_fields=["k8s_objects"])
    assert run.pk in waiting_ids()
    # The next start knows it is a restart (GPUPAAS_RESTART_COUNT).
    assert restart_count(run) == 1
    # Requeued after a preemption (cluster cleared): waits on nothing.
    preempted = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.QUEUED,
        cluster=None,
        k8s_objects=JOB,
    )
    assert preempted.pk in waiting_ids()


def test_a_job_retried_by_its_job_may_go_from_running_back_to_starting() -> None:
    core.check_transition(core.RUNNING, core.STARTING)
    core.check_transition(core.STARTING, core.QUEUED)
    core.check_transition(core.RUNNING, core.QUEUED)
    with pytest.raises(core.TransitionError):
        core.check_transition(core.FAILED, core.QUEUED)
