"""Gangs (multi-node training jobs): one Indexed Job whose pods live and die together, and
what a lost or failed replica means for the whole. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from apps.orchestration.status.pods import (
    RETRY_PREFIX,
    Observation,
    _as_dt,
    _condition,
    _exit_code,
    _exit_code_of_condition,
    _exit_failure,
    _latest_first,
    _loss,
    _meta,
    _owned_by,
    _pod_started,
    _replica,
    _unschedulable,
    _waiting,
)
from apps.workloads import core as wl

Pods = Sequence[Mapping[str, Any]]


def _gang_ended(jobs: Pods, pods: Pods) -> tuple[Observation | None, Mapping[str, Any] | None]:
    """The gang's end as its Job says it (out of time, or every replica completed), and the
    Job's failure condition if it has one."""
    ended = None
    for job in jobs:
        ended = _condition(job, "Failed") or _condition(job, "FailureTarget") or ended
    if ended is not None and ended.get("reason") == "DeadlineExceeded":
        finished = _as_dt(ended.get("lastTransitionTime"))
        expired = Observation(wl.EXPIRED, "max runtime reached (DeadlineExceeded)", None, finished)
        return expired, ended
    if jobs and all(_condition(j, "Complete") is not None for j in jobs):
        finished = max(
            (t for t in (_as_dt((j.get("status") or {}).get("completionTime")) for j in jobs) if t),
            default=None,
        )
        code = _exit_code(pods)
        return Observation(
            wl.SUCCEEDED, "completed", _pod_started(pods), finished, 0 if code is None else code
        ), ended
    return None, ended


def _failure_and_loss(pods: Pods, ended: Mapping[str, Any] | None) -> tuple[str | None, str | None]:
    """A replica that failed on its own, and one that was lost (either may be None); the
    Job's condition tells which when no pod says it any more."""
    failure = next(
        (f"{_replica(p)} failed: {why}" for p in pods if (why := _exit_failure(p))), None
    )
    lost = next((f"{_replica(p)} was lost: {why}" for p in pods if (why := _loss(p))), None)
    if failure is None and lost is None and ended is not None:
        message = str(ended.get("message") or ended.get("reason") or "the Job failed")
        if ended.get("reason") == "PodFailurePolicy" and "exit code" in message:
            failure = _failure_of_condition(message) or f"a replica failed: {message}"
        else:
            lost = f"a replica was lost: {message}"
    return failure, lost


# The Job controller's words for a pod failure policy rule that failed the Job ("Container main
# for pod team-x/wl-7-1-abcde failed with exit code 3 matching FailJob rule at index 1").
_POLICY_FAILURE = re.compile(
    r"Container (?P<container>\S+) for pod (?:[^/\s]+/)?(?P<pod>\S+) failed with exit code "
    r"(?P<code>\d+)"
)
# An Indexed Job's pod is named <job>-<index>-<suffix>.
_INDEX_IN_POD_NAME = re.compile(r"-(\d+)-[a-z0-9]+$")


def _failure_of_condition(message: str) -> str | None:
    """A replica's failure in the portal's own words, read from the Job's condition when the
    failed pod is no longer listed: the same words as from the pod, less the container's
    reason, which the condition does not carry."""
    found = _POLICY_FAILURE.search(message)
    if found is None:
        return None
    pod = found.group("pod")
    index = _INDEX_IN_POD_NAME.search(pod)
    who = f"replica {index.group(1)} (pod {pod})" if index else f"pod {pod}"
    container, code = found.group("container"), found.group("code")
    return f"{who} failed: container {container} exited with code {code}"


def _after_gang_failure(
    pods: Pods,
    ended: Mapping[str, Any] | None,
    failure: str,
    *,
    replicas: int,
    retries: int,
    retries_used: int,
) -> Observation:
    """A replica failed on its own: a retry of the whole gang while retries are left."""
    code = next(
        (c for p in _latest_first(pods) if _exit_failure(p) and (c := _exit_code([p])) is not None),
        _exit_code_of_condition(ended),
    )
    if retries_used >= retries:
        return Observation(wl.FAILED, f"failed: {failure}", exit_code=code)
    # A retry after a failure, not a preemption: back in the queue at once (no grace
    # period: nothing was taken away), whatever was chosen for preemptions.
    retry = f"{RETRY_PREFIX}{retries_used + 1} of {retries} after a failure: {failure}."
    return Observation(
        wl.QUEUED,
        f"{retry} The gang restarts whole: back in the queue now, then admitted again "
        f"with all {replicas} replicas together.",
        exit_code=code,
        retry=retries_used + 1,
        retry_reason=retry,
    )


def _gang_progress(pods: Pods, *, replicas: int, trying: str | None) -> Observation:
    """No replica failed or was lost: running once every replica runs (or has finished)."""
    running = [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and not _meta(p).get("deletionTimestamp")
    ]
    done = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    if running and len(running) + len(done) >= replicas:
        times = [_as_dt((p.get("status") or {}).get("startTime")) for p in running]
        known = [t for t in times if t is not None]
        reason = f"running: all {replicas} replicas"
        if done:
            reason = f"running: {len(running)} of {replicas} replicas; the others have finished"
        # The gang runs from the moment its last replica does.
        return Observation(wl.RUNNING, reason, max(known) if known else None)
    unschedulable = _unschedulable(pods)
    if unschedulable:
        return Observation(None, unschedulable)
    if not pods:
        return Observation(None, "waiting for Kubernetes to create the pods")
    return Observation(
        None,
        trying
        or f"starting: {len(running)} of {replicas} replicas running; the gang runs when all do",
    )


def observe_gang(
    *,
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    replicas: int,
    retries: int = 0,
    retries_used: int = 0,
    requeue: bool = True,
    now: datetime | None = None,
) -> Observation:
    """A multi-node training job: one Indexed Job whose pods live and die together.

    Running only once every replica runs. One replica lost (deleted, evicted, preempted, its
    node gone) restarts the whole gang: the workload goes back to the queue (preempted, then
    requeued after the grace period) and is admitted again with all replicas, on nodes that
    have room then. One replica failing on its own spends a retry: a retry after a failure,
    straight back to the queue (no preemption, no grace period; ``requeue`` is about
    preemptions only), or fails the workload, with the exit code, when none is left. The Job
    fails at once in both cases (its pod failure policy), so no replica waits on a rendezvous
    that cannot complete.
    """
    pods = _owned_by(pods, jobs)
    finished, ended = _gang_ended(jobs, pods)
    if finished is not None:
        return finished
    waiting = _waiting(pods, now)
    if waiting.fatal:
        return Observation(wl.FAILED, waiting.fatal)
    failure, lost = _failure_and_loss(pods, ended)
    if failure is not None:
        return _after_gang_failure(
            pods, ended, failure, replicas=replicas, retries=retries, retries_used=retries_used
        )
    if lost is not None:
        then = (
            f"back in the queue, then admitted again with all {replicas} replicas together."
            if requeue
            else "you chose not to requeue it; resubmit when you are ready."
        )
        return Observation(wl.PREEMPTED, f"{lost}. The gang restarts whole: {then}")
    return _gang_progress(pods, replicas=replicas, trying=waiting.trying)
