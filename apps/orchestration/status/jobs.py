"""Jobs of one pod, sweeps' trials, notebooks and endpoints: their pods as a workload state
and a readable reason, retries after a failure included. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from apps.orchestration.status.pods import (
    EXIT_CODE_WAIT_SECONDS,
    RETRY_PREFIX,
    Observation,
    _as_dt,
    _condition,
    _disrupted,
    _exit_code,
    _exit_code_of_condition,
    _exit_failure,
    _fatal_waiting,
    _finished_at,
    _latest_first,
    _meta,
    _owned_by,
    _pod_started,
    _terminated_reason,
    _unschedulable,
    _unsettled,
    _waiting,
)
from apps.workloads import core as wl


def observe_job_workload(
    *,
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    expected_jobs: int,
    retries: int = 0,
    now: datetime | None = None,
) -> Observation:
    """Training jobs of one replica and sweeps' trials: batch/v1 Jobs and their pods.

    A run that fails with retries left (``retries``: the Job's backoffLimit) is started again
    by the Job itself: shown as a retry after the failure (starting, then running again), its
    exit code recorded, never as a preemption and with no grace period; the failure beyond the
    last retry fails the workload at once, with the program's exit code."""
    pods = _owned_by(pods, jobs)
    for job in jobs:
        failed = _condition(job, "Failed")
        if failed is not None:
            finished = _as_dt(failed.get("lastTransitionTime"))
            if failed.get("reason") == "DeadlineExceeded":
                return Observation(
                    wl.EXPIRED, "max runtime reached (DeadlineExceeded)", None, finished
                )
            code = _exit_code(pods)
            if code is None:
                code = _exit_code_of_condition(failed)
            if (
                code is None
                and now is not None
                and finished is not None
                and _unsettled(pods)
                and (now - finished).total_seconds() < EXIT_CODE_WAIT_SECONDS
            ):
                return Observation(None, "failed; waiting for the pod to say how it ended")
            detail = _terminated_reason(pods) or failed.get("message") or failed.get("reason")
            return Observation(wl.FAILED, f"failed: {detail}", None, finished, code)
    complete = [j for j in jobs if _condition(j, "Complete") is not None]
    if jobs and len(complete) == len(jobs) and len(jobs) >= expected_jobs:
        finished = max(
            (t for t in (_as_dt((j.get("status") or {}).get("completionTime")) for j in jobs) if t),
            default=None,
        )
        code = _exit_code(pods)
        return Observation(
            wl.SUCCEEDED, "completed", _pod_started(pods), finished, 0 if code is None else code
        )
    failures = _latest_first([p for p in pods if _exit_failure(p)])
    if failures and expected_jobs == 1 and len(jobs) == 1:
        return _after_failures(pods, failures, retries=retries, now=now)
    return _observe_pods(pods, now=now)


def _after_failures(
    pods: Sequence[Mapping[str, Any]],
    failures: Sequence[Mapping[str, Any]],
    *,
    retries: int,
    now: datetime | None,
) -> Observation:
    """A one-Job workload whose program failed ``len(failures)`` times (latest first)."""
    why = _terminated_reason(failures[:1]) or "the program failed"
    code = _exit_code(failures[:1])
    count = len(failures)
    if count > retries:
        # The Job fails now (its backoffLimit is the retries): so does the workload.
        return Observation(wl.FAILED, f"failed: {why}", None, _finished_at(failures[0]), code)
    others = [p for p in pods if p not in failures]
    fatal = _fatal_waiting(others, now)
    if fatal:
        return Observation(wl.FAILED, fatal, exit_code=code)
    again = [
        p
        for p in others
        if (p.get("status") or {}).get("phase") == "Running"
        and not _meta(p).get("deletionTimestamp")
    ]
    retry = f"{RETRY_PREFIX}{count} of {retries} after a failure: {why}."
    if again:
        return Observation(
            wl.RUNNING,
            f"running again: {retry[0].lower()}{retry[1:]}",
            _pod_started(again),
            exit_code=code,
            retry=count,
            retry_reason=retry,
        )
    return Observation(
        wl.STARTING,
        f"{retry} Kubernetes starts it again after a back-off.",
        exit_code=code,
        retry=count,
        retry_reason=retry,
    )


def observe_notebook(
    *, pods: Sequence[Mapping[str, Any]], now: datetime | None = None
) -> Observation:
    return _observe_pods(pods, need_ready=True, now=now)


def observe_endpoint(
    *,
    pods: Sequence[Mapping[str, Any]],
    replicas: int,
    running: bool,
    now: datetime | None = None,
) -> Observation:
    """An endpoint runs while any replica is ready, and is never preempted or failed by its
    pods once it ran: a rolling update's failing replicas are rolled back, not fatal. Before
    its first ready replica, a pod that can never start (image not found, …) fails it."""
    live = [p for p in pods if not _meta(p).get("deletionTimestamp")]
    ready = [
        p
        for p in live
        if (p.get("status") or {}).get("phase") == "Running" and _condition(p, "Ready")
    ]
    reason = f"{len(ready)} of {replicas} replicas ready"
    if running:
        return Observation(None, reason)
    if ready:
        return Observation(wl.RUNNING, reason, _pod_started(ready))
    waiting = _waiting(live, now)
    if waiting.fatal:
        return Observation(wl.FAILED, waiting.fatal)
    unschedulable = _unschedulable(live)
    if unschedulable:
        return Observation(None, unschedulable)
    if not live:
        return Observation(None, "waiting for Kubernetes to create the pods")
    return Observation(None, waiting.trying or "starting: pulling the image and loading the model")


def _observe_pods(
    pods: Sequence[Mapping[str, Any]], *, need_ready: bool = False, now: datetime | None = None
) -> Observation:
    waiting = _waiting(pods, now)
    if waiting.fatal:
        return Observation(wl.FAILED, waiting.fatal)
    disrupted = _disrupted(pods)
    if disrupted:
        return Observation(wl.PREEMPTED, disrupted)
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    if running and (not need_ready or any(_condition(p, "Ready") for p in running)):
        return Observation(wl.RUNNING, "running", _pod_started(running))
    unschedulable = _unschedulable(pods)
    if unschedulable:
        return Observation(None, unschedulable)
    if not pods:
        return Observation(None, "waiting for Kubernetes to create the pods")
    return Observation(
        None, waiting.trying or "starting: pulling the image and starting the containers"
    )
