"""What the cluster reports, as workload states and reasons: plain data in, plain data out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
    assert seen.reason == (
        "failed: out of memory: container main was killed at its memory limit "
        "(OOMKilled, exit code 137)"
    )
    assert seen.exit_code == 137


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
    assert seen.reason == (
        "image the image is not available on this cluster (ImagePullBackOff: repo not found)"
    )


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


def test_a_claim_no_device_can_satisfy_says_so_in_words() -> None:
    said = "0/9 nodes are available: 1 cannot allocate all claims, 8 node(s) didn't match."
    pending = pod(
        conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": said}
        ]
    )
    seen = st.observe_job_workload(jobs=[job()], pods=[pending], expected_jobs=1)
    assert seen.state is None
    assert seen.reason.startswith(
        "Unschedulable: no free device on its node matches its GPU claim (DRA): taken outside "
        "the portal, or not published by the node's DRA driver; it waits until one is."
    )
    assert seen.reason.endswith(f"Kubernetes said: {said}")


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
    # A retry after a failure: straight back to the queue, never a preemption.
    assert (retry.state, retry.reason, retry.exit_code, retry.retry) == (
        wl.QUEUED,
        "Retry 2 of 2 after a failure: replica 1 (pod wl-1-1-x1) failed: container main exited "
        "with code 3 (Error). The gang restarts whole: back in the queue now, then admitted "
        "again with all 2 replicas together.",
        3,
        2,
    )
    assert retry.reason.startswith(st.RETRY_PREFIX)
    # Whether it requeues after a preemption is not about failures.
    opted_out = st.observe_gang(
        jobs=[ended], pods=[stopped, crashed], replicas=2, retries=2, retries_used=1, requeue=False
    )
    assert opted_out.state == wl.QUEUED
    spent = st.observe_gang(
        jobs=[ended], pods=[stopped, crashed], replicas=2, retries=2, retries_used=2
    )
    assert (spent.state, spent.reason, spent.exit_code) == (
        wl.FAILED,
        "failed: replica 1 (pod wl-1-1-x1) failed: container main exited with code 3 (Error)",
        3,
    )


def test_a_failed_gang_job_whose_pods_are_gone_is_judged_by_its_condition() -> None:
    by_exit = gang_job(
        "Failed", "PodFailurePolicy", "Container main for pod x failed with exit code 3"
    )
    gone = st.observe_gang(jobs=[by_exit], pods=[], replicas=2)
    assert (gone.state, gone.exit_code) == (wl.FAILED, 3)  # named by the Job's condition
    # The Job controller's own words become the portal's, as if read from the pod.
    worded = gang_job(
        "Failed",
        "PodFailurePolicy",
        "Container main for pod team-x/wl-7-1-ab3cd failed with exit code 3 matching FailJob "
        "rule at index 1",
    )
    said = st.observe_gang(jobs=[worded], pods=[], replicas=2)
    assert (said.state, said.reason, said.exit_code) == (
        wl.FAILED,
        "failed: replica 1 (pod wl-7-1-ab3cd) failed: container main exited with code 3",
        3,
    )
    retried = st.observe_gang(jobs=[worded], pods=[], replicas=2, retries=1)
    assert retried.state == wl.QUEUED
    assert retried.reason.startswith(
        "Retry 1 of 1 after a failure: replica 1 (pod wl-7-1-ab3cd) failed: container main "
        "exited with code 3. The gang restarts whole"
    )
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


# --- failures people can act on: out of memory, security settings, missing images -------------

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def limited_pod(phase: str, memory: str, **status: Any) -> dict[str, Any]:
    found = pod(phase, **status)
    found["spec"] = {
        "containers": [
            {"name": "main", "image": "reg/train:1", "resources": {"limits": {"memory": memory}}}
        ]
    }
    return found


def test_an_out_of_memory_kill_fails_with_the_limit_it_hit() -> None:
    oom = limited_pod(
        "Failed",
        "64Mi",
        containerStatuses=[
            {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
        ],
    )
    seen = st.observe_job_workload(
        jobs=[job("Failed", "BackoffLimitExceeded")], pods=[oom], expected_jobs=1
    )
    assert (seen.state, seen.exit_code) == (wl.FAILED, 137)
    assert seen.reason.startswith("failed: out of memory (limit 64Mi): container main was killed")
    # Seen before the Job's own condition (no retries left): failed at once, just the same.
    early = st.observe_job_workload(jobs=[job()], pods=[oom], expected_jobs=1)
    assert (early.state, early.reason, early.exit_code) == (wl.FAILED, seen.reason, 137)
    assert (
        "limit 8Gi"
        in st.observe_job_workload(
            jobs=[job()],
            pods=[
                limited_pod(
                    "Failed", "8192Mi", containerStatuses=oom["status"]["containerStatuses"]
                )
            ],
            expected_jobs=1,
        ).reason
    )


def waiting_pod(reason: str, message: str = "", started: str = "2026-11-30T00:59:30Z") -> Any:
    found = limited_pod("Pending", "1Gi", startTime=started)
    found["status"]["containerStatuses"] = [
        {"name": "main", "state": {"waiting": {"reason": reason, "message": message}}}
    ]
    return found


def test_a_container_refused_by_its_security_settings_fails_in_words_people_can_act_on() -> None:
    root = waiting_pod(
        "CreateContainerConfigError", "container has runAsNonRoot and image will run as root"
    )
    seen = st.observe_job_workload(jobs=[job()], pods=[root], expected_jobs=1, now=NOW)
    assert seen.state == wl.FAILED
    assert seen.reason == (
        "the image runs as root, which this platform does not allow (containers run as a "
        "non-root user): set a non-root USER in the image (CreateContainerConfigError: "
        "container has runAsNonRoot and image will run as root)"
    )
    named = waiting_pod(
        "CreateContainerConfigError",
        "container has runAsNonRoot and image has non-numeric user (jovyan), cannot verify "
        "user is non-root",
    )
    assert "numeric USER" in st.observe_notebook(pods=[named], now=NOW).reason
    missing = waiting_pod(
        "RunContainerError",
        'exec: "trian.py": executable file not found in $PATH',
    )
    assert st.observe_job_workload(jobs=[job()], pods=[missing], expected_jobs=1).reason.startswith(
        "the command is not in the image"
    )


def test_an_image_that_is_not_there_fails_after_a_short_grace_not_pending_forever() -> None:
    pulling = waiting_pod("ErrImagePull", "not found", started="2026-11-30T00:59:30Z")
    trying = st.observe_job_workload(jobs=[job()], pods=[pulling], expected_jobs=1, now=NOW)
    assert trying.state is None
    assert trying.reason == (
        "pulling the image failed; trying again for up to 60 s: image reg/train:1 is not "
        "available on this cluster (ErrImagePull: not found)"
    )
    backoff = waiting_pod("ImagePullBackOff", "Back-off pulling", started="2026-11-30T00:58:59Z")
    seen = st.observe_job_workload(jobs=[job()], pods=[backoff], expected_jobs=1, now=NOW)
    assert (seen.state, seen.reason) == (
        wl.FAILED,
        "image reg/train:1 is not available on this cluster (ImagePullBackOff: Back-off pulling)",
    )
    # Never pulled (pull policy Never, or a name that cannot be one): at once.
    never = waiting_pod("ErrImageNeverPull", 'image "reg/train:1" is not present')
    assert st.observe_job_workload(jobs=[job()], pods=[never], expected_jobs=1, now=NOW).state == (
        wl.FAILED
    )
    invalid = st.observe_notebook(pods=[waiting_pod("InvalidImageName", "bad")], now=NOW)
    assert (invalid.state, invalid.reason) == (
        wl.FAILED,
        "the image name reg/train:1 is invalid (InvalidImageName: bad)",
    )
    # Endpoints and gangs the same.
    assert st.observe_endpoint(pods=[backoff], replicas=1, running=False, now=NOW).state == (
        wl.FAILED
    )
    assert st.observe_gang(jobs=[job()], pods=[pulling], replicas=2, now=NOW).reason.startswith(
        "pulling the image failed"
    )


# --- a job's retries after a failure ------------------------------------------------------------


def attempt(name: str, phase: str, created: str, code: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "startTime": created}
    if code is not None:
        status["containerStatuses"] = [
            {
                "name": "main",
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Error",
                        "finishedAt": "2026-11-30T00:59:50Z",
                    }
                },
            }
        ]
    meta = {"name": name, "creationTimestamp": created, "ownerReferences": [{"uid": "j1"}]}
    return {"metadata": meta, "status": status}


def the_job(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"uid": "j1"},
        "status": {
            "conditions": [
                {"type": t, "status": "True", "reason": r, "message": msg}
                for t, r, msg in conditions
            ]
        },
    }


def test_a_failed_run_with_retries_left_is_a_retry_after_failure_not_a_preemption() -> None:
    first = attempt("wl-1-a", "Failed", "2026-11-30T00:59:00Z", code=3)
    waiting = st.observe_job_workload(
        jobs=[the_job()], pods=[first], expected_jobs=1, retries=2, now=NOW
    )
    assert (waiting.state, waiting.exit_code, waiting.retry) == (wl.STARTING, 3, 1)
    assert waiting.reason == (
        "Retry 1 of 2 after a failure: container main exited with code 3 (Error). Kubernetes "
        "starts it again after a back-off."
    )
    assert waiting.retry_reason == (
        "Retry 1 of 2 after a failure: container main exited with code 3 (Error)."
    )
    again = attempt("wl-1-b", "Running", "2026-11-30T01:00:10Z")
    running = st.observe_job_workload(
        jobs=[the_job()], pods=[first, again], expected_jobs=1, retries=2, now=NOW
    )
    assert (running.state, running.retry, running.exit_code) == (wl.RUNNING, 1, 3)
    assert running.reason == (
        "running again: retry 1 of 2 after a failure: container main exited with code 3 (Error)."
    )
    assert running.started_at is not None and running.started_at.minute == 0


def test_the_failure_beyond_the_last_retry_fails_at_once_with_the_exit_code() -> None:
    pods = [
        attempt("wl-1-a", "Failed", "2026-11-30T00:58:00Z", code=3),
        attempt("wl-1-b", "Failed", "2026-11-30T00:59:00Z", code=4),
    ]
    seen = st.observe_job_workload(jobs=[the_job()], pods=pods, expected_jobs=1, retries=1, now=NOW)
    assert (seen.state, seen.exit_code, seen.reason) == (
        wl.FAILED,
        4,
        "failed: container main exited with code 4 (Error)",
    )
    assert seen.finished_at is not None
    # And once the Job says so, with the latest run's exit code.
    failed = the_job(
        ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    )
    done = st.observe_job_workload(jobs=[failed], pods=pods, expected_jobs=1, retries=1, now=NOW)
    assert (done.state, done.exit_code) == (wl.FAILED, 4)


def test_a_failed_job_waits_briefly_for_its_pods_exit_code_then_fails_without_one() -> None:
    """The watch's streams of Jobs and pods are not ordered: the Job's failure may come before
    the copy of its pod says how the program ended."""
    failed = the_job(("Failed", "BackoffLimitExceeded", "backoff limit"))
    failed["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-30T00:59:50Z"
    stale = attempt("wl-1-a", "Running", "2026-11-30T00:59:00Z")
    early = st.observe_job_workload(jobs=[failed], pods=[stale], expected_jobs=1, now=NOW)
    assert early.state is None
    late = st.observe_job_workload(
        jobs=[failed], pods=[stale], expected_jobs=1, now=NOW + timedelta(seconds=60)
    )
    assert (late.state, late.exit_code) == (wl.FAILED, None)


def test_an_endpoint_s_replicas_are_read_from_its_pods_oldest_first() -> None:
    def served(name: str, created: str, **status: Any) -> dict[str, Any]:
        node = status.pop("node", "")
        return {
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node} if node else {},
            "status": status,
        }

    ready = [{"type": "Ready", "status": "True"}]
    pods = [
        served("b", "2026-12-02T10:00:02Z", node="l40s-ts-1", phase="Running", conditions=ready),
        served("a", "2026-12-02T10:00:01Z", node="l40s-ts-0", phase="Running", conditions=[]),
        served(
            "c",
            "2026-12-02T10:00:03Z",
            phase="Pending",
            conditions=[
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
                }
            ],
        ),
    ]
    assert st.replicas_seen(pods) == [
        st.ReplicaSeen("l40s-ts-0", "running, not ready yet"),
        st.ReplicaSeen("l40s-ts-1", "running"),
        st.ReplicaSeen(
            "",
            "waiting: Unschedulable: 0/9 nodes are available: 9 Insufficient nvidia.com/gpu.",
        ),
    ]
