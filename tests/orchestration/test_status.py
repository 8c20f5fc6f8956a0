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


# --- gangs ----------------------------------------------------------------------------------


def replica(index: int, phase: str = "Running", *, job_uid: str = "j1", **extra: Any) -> Any:
    meta: dict[str, Any] = {
        "name": f"wl-1-{index}-x{index}",
        "labels": {"batch.kubernetes.io/job-completion-index": str(index)},
        "ownerReferences": [{"kind": "Job", "uid": job_uid}],
    }
    meta.update(extra.pop("meta", {}))
    started = f"2026-11-30T01:00:0{index}Z"
    return {"metadata": meta, "status": {"phase": phase, "startTime": started, **extra}}


def gang_job(condition: str | None = None, reason: str = "", message: str = "") -> Any:
    found = job(condition, reason)
    if condition:
        found["status"]["conditions"][0]["message"] = message
    found["metadata"] = {"uid": "j1"}
    return found


EXITED_3 = [{"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}]


def test_gang_runs_only_when_every_replica_runs_from_the_last_ones_start() -> None:
    half = st.observe_gang(jobs=[gang_job()], pods=[replica(0), replica(1, "Pending")], replicas=2)
    assert (half.state, half.reason) == (
        None,
        "starting: 1 of 2 replicas running; the gang runs when all do",
    )
    whole = st.observe_gang(jobs=[gang_job()], pods=[replica(0), replica(1)], replicas=2)
    assert (whole.state, whole.reason) == (wl.RUNNING, "running: all 2 replicas")
    assert whole.started_at is not None and whole.started_at.second == 1


def test_a_deleted_replica_restarts_the_whole_gang_through_the_queue() -> None:
    deleted = replica(1, meta={"deletionTimestamp": "2026-11-30T01:05:00Z"})
    seen = st.observe_gang(jobs=[gang_job()], pods=[replica(0), deleted], replicas=2)
    assert (seen.state, seen.reason) == (
        wl.PREEMPTED,
        "replica 1 (pod wl-1-1-x1) was lost: deleted. The gang restarts whole: back in the "
        "queue, then admitted again with all 2 replicas together.",
    )
    opted_out = st.observe_gang(
        jobs=[gang_job()], pods=[replica(0), deleted], replicas=2, requeue=False
    )
    assert opted_out.reason.endswith("you chose not to requeue it; resubmit when you are ready.")


def test_an_evicted_or_preempted_replica_is_a_loss_not_a_failure() -> None:
    evicted = replica(
        0,
        "Failed",
        conditions=[
            {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
        ],
    )
    seen = st.observe_gang(
        jobs=[gang_job("FailureTarget", "PodFailurePolicy", "Pod has condition DisruptionTarget")],
        pods=[evicted, replica(1)],
        replicas=2,
    )
    assert seen.state == wl.PREEMPTED
    assert seen.reason.startswith("replica 0 (pod wl-1-0-x0) was lost: disrupted by the cluster")


def test_a_failing_replica_spends_a_retry_on_a_whole_restart_then_fails_the_gang() -> None:
    crashed = replica(1, "Failed", containerStatuses=EXITED_3)
    # The Job stopped the other replica (FailJob): its deletion is no loss of its own.
    stopped = replica(0, meta={"deletionTimestamp": "2026-11-30T01:05:00Z"})
    ended = gang_job("FailureTarget", "PodFailurePolicy", "Container main ... exit code 3")
    retry = st.observe_gang(
        jobs=[ended], pods=[stopped, crashed], replicas=2, retries=2, retries_used=1
    )
    assert (retry.state, retry.reason) == (
        wl.PREEMPTED,
        "Retry 2 of 2: replica 1 (pod wl-1-1-x1) failed: container main exited with code 3 "
        "(Error). The gang restarts whole: back in the queue, then admitted again with all 2 "
        "replicas together.",
    )
    assert retry.reason.startswith(st.GANG_RETRY_PREFIX)
    spent = st.observe_gang(
        jobs=[ended], pods=[stopped, crashed], replicas=2, retries=2, retries_used=2
    )
    assert (spent.state, spent.reason) == (
        wl.FAILED,
        "failed: replica 1 (pod wl-1-1-x1) failed: container main exited with code 3 (Error)",
    )


def test_a_failed_gang_job_whose_pods_are_gone_is_judged_by_its_condition() -> None:
    by_exit = gang_job(
        "Failed", "PodFailurePolicy", "Container main for pod x failed with exit code 3"
    )
    assert st.observe_gang(jobs=[by_exit], pods=[], replicas=2).state == wl.FAILED
    lost = gang_job("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    seen = st.observe_gang(jobs=[lost], pods=[], replicas=2, retries=0)
    assert seen.state == wl.PREEMPTED and seen.reason.startswith("a replica was lost")
    deadline = st.observe_gang(jobs=[gang_job("Failed", "DeadlineExceeded")], pods=[], replicas=2)
    assert deadline.state == wl.EXPIRED


def test_pods_of_an_earlier_incarnation_of_the_gang_are_ignored() -> None:
    old = replica(1, job_uid="j0", meta={"deletionTimestamp": "2026-11-30T01:05:00Z"})
    seen = st.observe_gang(jobs=[gang_job()], pods=[replica(0), replica(1), old], replicas=2)
    assert seen.state == wl.RUNNING


def test_a_gang_whose_first_replicas_finished_is_still_running_then_succeeds() -> None:
    finished = replica(0, "Succeeded")
    seen = st.observe_gang(jobs=[gang_job()], pods=[finished, replica(1)], replicas=2)
    assert (seen.state, seen.reason) == (
        wl.RUNNING,
        "running: 1 of 2 replicas; the others have finished",
    )
    done = st.observe_gang(jobs=[gang_job("Complete")], pods=[finished], replicas=2)
    assert done.state == wl.SUCCEEDED


def test_the_exit_code_of_a_finished_job_is_observed() -> None:
    crashed = pod(
        "Failed",
        containerStatuses=[
            {"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
        ],
    )
    seen = st.observe_job_workload(
        jobs=[job("Failed", "BackoffLimitExceeded")], pods=[crashed], expected_jobs=1
    )
    assert seen.exit_code == 3
    done = st.observe_job_workload(jobs=[job("Complete")], pods=[], expected_jobs=1)
    assert (done.state, done.exit_code) == (wl.SUCCEEDED, 0)
