"""What the cluster says about a workload, as a workload state and a readable reason. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.workloads import core as wl

# Container waiting reasons that will not resolve by waiting: the workload has failed.
FATAL_WAITING = {
    "ErrImagePull": "the image cannot be pulled",
    "ImagePullBackOff": "the image cannot be pulled",
    "InvalidImageName": "the image name is invalid",
    "CreateContainerConfigError": "the container configuration is invalid",
    "CreateContainerError": "the container cannot be created",
    "RunContainerError": "the command cannot be started",
}


@dataclass(frozen=True)
class Observation:
    """The state the workload should move to (None: stay), with reason and cluster times."""

    state: str | None
    reason: str
    started_at: datetime | None = None
    finished_at: datetime | None = None


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(((obj.get("status") or {}).get("conditions")) or [])


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in _conditions(obj):
        if cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _as_dt(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _pod_started(pods: Sequence[Mapping[str, Any]]) -> datetime | None:
    times = [_as_dt((p.get("status") or {}).get("startTime")) for p in pods]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _container_statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def _terminated_reason(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        for status in _container_statuses(pod):
            term = (status.get("state") or {}).get("terminated") or (
                status.get("lastState") or {}
            ).get("terminated")
            if term and term.get("exitCode", 0) != 0:
                why = term.get("reason") or "Error"
                if why == "OOMKilled":
                    return f"container {status.get('name')} ran out of memory (OOMKilled)"
                code = term.get("exitCode")
                return f"container {status.get('name')} exited with code {code} ({why})"
    return None


def _fatal_waiting(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        for status in _container_statuses(pod):
            waiting = (status.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason in FATAL_WAITING:
                message = waiting.get("message") or ""
                return f"{reason}: {FATAL_WAITING[reason]}" + (f" ({message})" if message else "")
    return None


def _unschedulable(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        for cond in _conditions(pod):
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return f"Unschedulable: {cond.get('message') or 'no node fits'}"
    return None


def _disrupted(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        cond = _condition(pod, "DisruptionTarget")
        if cond is None:
            if (pod.get("status") or {}).get("reason") == "NodeLost":
                return "node lost: the pod's node stopped responding"
            continue
        reason = cond.get("reason")
        if reason == "PreemptionByScheduler":
            return "preempted by a higher class"
        if reason == "DeletionByTaintManager":
            return "node lost: the pod's node stopped responding"
        return f"disrupted by the cluster ({reason})"
    return None


def observe_job_workload(
    *, jobs: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]], expected_jobs: int
) -> Observation:
    """Training jobs and sweeps: one or more batch/v1 Jobs and their pods."""
    for job in jobs:
        failed = _condition(job, "Failed")
        if failed is not None:
            finished = _as_dt(failed.get("lastTransitionTime"))
            if failed.get("reason") == "DeadlineExceeded":
                return Observation(
                    wl.EXPIRED, "max runtime reached (DeadlineExceeded)", None, finished
                )
            detail = _terminated_reason(pods) or failed.get("message") or failed.get("reason")
            return Observation(wl.FAILED, f"failed: {detail}", None, finished)
    complete = [j for j in jobs if _condition(j, "Complete") is not None]
    if jobs and len(complete) == len(jobs) and len(jobs) >= expected_jobs:
        finished = max(
            (t for t in (_as_dt((j.get("status") or {}).get("completionTime")) for j in jobs) if t),
            default=None,
        )
        return Observation(wl.SUCCEEDED, "completed", _pod_started(pods), finished)
    return _observe_pods(pods)


def observe_notebook(*, pods: Sequence[Mapping[str, Any]]) -> Observation:
    return _observe_pods(pods, need_ready=True)


def _observe_pods(pods: Sequence[Mapping[str, Any]], *, need_ready: bool = False) -> Observation:
    fatal = _fatal_waiting(pods)
    if fatal:
        return Observation(wl.FAILED, fatal)
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
    return Observation(None, "starting: pulling the image and starting the containers")
