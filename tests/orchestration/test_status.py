"""What the cluster reports, as workload states and reasons: plain data in, plain data out."""

from __future__ import annotations

from typing import Any

from apps.orchestration import status as st
from apps.workloads import core as wl


def pod(phase: str = "Pending", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": "wl-1-abc"}, "status": {"phase": phase, **status}}


def job(condition: str | None = None, reason: str = "", **status: Any) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "reason": reason}] if condition else []
    return {"status": {"conditions": conditions, **status}}


def test_running_pod_means_running_with_its_start_time() -> None:
    seen = st.observe_job_workload(
        jobs=[job()], pods=[pod("Running", startTime="2026-11-30T01:00:00Z")], expected_jobs=1
    )
    assert seen.state == wl.RUNNING
    assert (
        seen.started_at is not None and seen.started_at.isoformat() == "2026-11-30T01:00:00+00:00"
    )


def test_complete_job_succeeds_with_completion_time() -> None:
    seen = st.observe_job_workload(
        jobs=[job("Complete", completionTime="2026-11-30T02:00:00Z")], pods=[], expected_jobs=1
    )
    assert seen.state == wl.SUCCEEDED
    assert seen.finished_at is not None


def test_sweep_succeeds_only_when_every_point_completed() -> None:
    seen = st.observe_job_workload(jobs=[job("Complete")], pods=[], expected_jobs=2)
    assert seen.state != wl.SUCCEEDED


def test_deadline_exceeded_expires() -> None:
    seen = st.observe_job_workload(
        jobs=[job("Failed", "DeadlineExceeded")], pods=[], expected_jobs=1
    )
    assert (seen.state, seen.reason) == (wl.EXPIRED, "max runtime reached (DeadlineExceeded)")


def test_failed_job_names_the_exit_code_or_oom() -> None:
    crashed = pod(
        "Failed",
        containerStatuses=[
            {"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
        ],
    )
    seen = st.observe_job_workload(
        jobs=[job("Failed", "BackoffLimitExceeded")], pods=[crashed], expected_jobs=1
    )
    assert (seen.state, seen.reason) == (
        wl.FAILED,
        "failed: container main exited with code 3 (Error)",
    )
    oom = pod(
        "Failed",
        containerStatuses=[
            {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
        ],
    )
    seen = st.observe_job_workload(
        jobs=[job("Failed", "BackoffLimitExceeded")], pods=[oom], expected_jobs=1
    )
    assert "ran out of memory (OOMKilled)" in seen.reason


def test_image_pull_errors_fail_with_the_clusters_reason() -> None:
    waiting = pod(
        containerStatuses=[
            {
                "name": "main",
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "repo not found"}},
            }
        ]
    )
    seen = st.observe_job_workload(jobs=[job()], pods=[waiting], expected_jobs=1)
    assert seen.state == wl.FAILED
    assert seen.reason == "ImagePullBackOff: the image cannot be pulled (repo not found)"


def test_unschedulable_keeps_state_and_says_why() -> None:
    pending = pod(
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
            }
        ]
    )
    seen = st.observe_job_workload(jobs=[job()], pods=[pending], expected_jobs=1)
    assert seen.state is None
    assert seen.reason == "Unschedulable: 0/9 nodes are available: 9 Insufficient nvidia.com/gpu."


def test_preemption_by_the_scheduler_and_node_loss_are_told_apart() -> None:
    preempted = pod(
        "Running",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ],
    )
    assert st.observe_job_workload(
        jobs=[job()], pods=[preempted], expected_jobs=1
    ) == st.Observation(wl.PREEMPTED, "preempted by a higher class")
    lost = pod(
        "Running",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
        ],
    )
    assert st.observe_job_workload(jobs=[job()], pods=[lost], expected_jobs=1).reason.startswith(
        "node lost"
    )


def test_notebook_is_running_only_when_ready() -> None:
    not_ready = pod("Running", conditions=[{"type": "Ready", "status": "False"}])
    ready = pod("Running", conditions=[{"type": "Ready", "status": "True"}])
    assert st.observe_notebook(pods=[not_ready]).state is None
    assert st.observe_notebook(pods=[ready]).state == wl.RUNNING


def test_no_pods_yet_waits() -> None:
    seen = st.observe_job_workload(jobs=[], pods=[], expected_jobs=1)
    assert (seen.state, seen.reason) == (None, "waiting for Kubernetes to create the pods")
