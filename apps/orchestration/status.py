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
    exit_code: int | None = None


def _exit_code(pods: Sequence[Mapping[str, Any]]) -> int | None:
    """The exit code of the latest pod's main container, once it has terminated."""
    latest = sorted(pods, key=lambda p: str(_meta(p).get("creationTimestamp") or ""))
    for pod in reversed(latest):
        for status in _container_statuses(pod):
            term = (status.get("state") or {}).get("terminated") or (
                status.get("lastState") or {}
            ).get("terminated")
            if term and isinstance(term.get("exitCode"), int):
                return int(term["exitCode"])
    return None


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
            return Observation(wl.FAILED, f"failed: {detail}", None, finished, _exit_code(pods))
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
    return _observe_pods(pods)


def observe_notebook(*, pods: Sequence[Mapping[str, Any]]) -> Observation:
    return _observe_pods(pods, need_ready=True)


def observe_endpoint(
    *, pods: Sequence[Mapping[str, Any]], replicas: int, running: bool
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
    fatal = _fatal_waiting(live)
    if fatal:
        return Observation(wl.FAILED, fatal)
    unschedulable = _unschedulable(live)
    if unschedulable:
        return Observation(None, unschedulable)
    if not live:
        return Observation(None, "waiting for Kubernetes to create the pods")
    return Observation(None, "starting: pulling the image and loading the model")


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


# --- gangs (multi-node training jobs) -----------------------------------------------------------

# Reasons of the restarts that spend one of the user's retries start with this (counted by
# the caller from the workload's events, so a retry survives the Job being recreated).
GANG_RETRY_PREFIX = "Retry "


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _owned_by(pods: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The pods of these Jobs only: pods of an earlier incarnation of the gang (a Job deleted
    for a restart, its pods not yet collected) say nothing about the current one."""
    uids = {_meta(j).get("uid") for j in jobs} - {None}
    if not uids:
        return list(pods)
    return [
        p
        for p in pods
        if any(ref.get("uid") in uids for ref in _meta(p).get("ownerReferences") or [])
    ]


def _replica(pod: Mapping[str, Any]) -> str:
    index = (_meta(pod).get("labels") or {}).get("batch.kubernetes.io/job-completion-index")
    name = _meta(pod).get("name") or "?"
    return f"replica {index} (pod {name})" if index is not None else f"pod {name}"


def _exit_failure(pod: Mapping[str, Any]) -> str | None:
    """The replica's own failure: its container exited non-zero, nobody deleted or evicted it."""
    if _meta(pod).get("deletionTimestamp") or _condition(pod, "DisruptionTarget"):
        return None
    if (pod.get("status") or {}).get("phase") != "Failed":
        return None
    return _terminated_reason([pod])


def _loss(pod: Mapping[str, Any]) -> str | None:
    """Why a replica's pod is gone or going although its program did not fail, or None."""
    status = pod.get("status") or {}
    disrupted = _disrupted([pod])
    if disrupted:
        return disrupted
    if _meta(pod).get("deletionTimestamp") and status.get("phase") != "Succeeded":
        return "deleted"
    if status.get("phase") == "Failed" and _terminated_reason([pod]) is None:
        return f"failed without exiting ({status.get('reason') or 'unknown reason'})"
    return None


def observe_gang(
    *,
    jobs: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    replicas: int,
    retries: int = 0,
    retries_used: int = 0,
    requeue: bool = True,
) -> Observation:
    """A multi-node training job: one Indexed Job whose pods live and die together.

    Running only once every replica runs. One replica lost (deleted, evicted, preempted, its
    node gone) restarts the whole gang: the workload goes back to the queue (preempted, then
    requeued after the grace period) and is admitted again with all replicas, on nodes that
    have room then. One replica failing on its own spends a retry the same way, or fails
    the workload when none is left. The Job fails at once in both cases (its pod failure
    policy), so no replica waits on a rendezvous that cannot complete.
    """
    pods = _owned_by(pods, jobs)
    ended = None
    for job in jobs:
        ended = _condition(job, "Failed") or _condition(job, "FailureTarget") or ended
    if ended is not None and ended.get("reason") == "DeadlineExceeded":
        finished = _as_dt(ended.get("lastTransitionTime"))
        return Observation(wl.EXPIRED, "max runtime reached (DeadlineExceeded)", None, finished)
    if jobs and all(_condition(j, "Complete") is not None for j in jobs):
        finished = max(
            (t for t in (_as_dt((j.get("status") or {}).get("completionTime")) for j in jobs) if t),
            default=None,
        )
        code = _exit_code(pods)
        return Observation(
            wl.SUCCEEDED, "completed", _pod_started(pods), finished, 0 if code is None else code
        )
    fatal = _fatal_waiting(pods)
    if fatal:
        return Observation(wl.FAILED, fatal)
    failure = next(
        (f"{_replica(p)} failed: {why}" for p in pods if (why := _exit_failure(p))), None
    )
    lost = next((f"{_replica(p)} was lost: {why}" for p in pods if (why := _loss(p))), None)
    if failure is None and lost is None and ended is not None:
        message = str(ended.get("message") or ended.get("reason") or "the Job failed")
        if ended.get("reason") == "PodFailurePolicy" and "exit code" in message:
            failure = f"a replica failed: {message}"
        else:
            lost = f"a replica was lost: {message}"
    if failure is not None:
        if retries_used < retries and requeue:
            return Observation(
                wl.PREEMPTED,
                f"{GANG_RETRY_PREFIX}{retries_used + 1} of {retries}: {failure}. The gang "
                f"restarts whole: back in the queue, then admitted again with all {replicas} "
                "replicas together.",
            )
        return Observation(wl.FAILED, f"failed: {failure}")
    if lost is not None:
        then = (
            f"back in the queue, then admitted again with all {replicas} replicas together."
            if requeue
            else "you chose not to requeue it; resubmit when you are ready."
        )
        return Observation(wl.PREEMPTED, f"{lost}. The gang restarts whole: {then}")
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
        f"starting: {len(running)} of {replicas} replicas running; the gang runs when all do",
    )


# --- rolling updates of endpoints ---------------------------------------------------------------

ROLLOUT_PROGRESSING = "progressing"
ROLLOUT_COMPLETE = "complete"
ROLLOUT_FAILED = "failed"


@dataclass(frozen=True)
class RolloutObservation:
    state: str  # progressing, complete or failed
    message: str
    updated: int  # replicas of the new revision
    ready: int  # ready replicas in all


def observe_rollout(
    deployment: Mapping[str, Any] | None,
    *,
    revision: int,
    revision_annotation: str,
    elapsed_seconds: float = 0.0,
    deadline_seconds: float | None = None,
) -> RolloutObservation:
    """How far a Deployment has rolled out ``revision``: complete when every replica runs it
    and is available and no old one is left; failed when the Deployment controller says its
    progress deadline passed (ProgressDeadlineExceeded), or when the rollout has not completed
    ``deadline_seconds`` after it began (replacement pods of a crashing server count as
    progress to the controller, never to the endpoint's users)."""
    if deployment is None:
        return RolloutObservation(ROLLOUT_PROGRESSING, "waiting for the Deployment", 0, 0)
    spec = deployment.get("spec") or {}
    status = deployment.get("status") or {}
    template = ((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    wanted = int(spec.get("replicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if str(template.get(revision_annotation)) != str(revision):
        return RolloutObservation(
            ROLLOUT_PROGRESSING, "the new revision is being applied", 0, ready
        )
    generation = int(_meta(deployment).get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0) >= generation
    if not observed:
        return RolloutObservation(
            ROLLOUT_PROGRESSING, "the controller has not seen it yet", 0, ready
        )
    for cond in _conditions(deployment):
        if (
            cond.get("type") == "Progressing"
            and cond.get("status") == "False"
            and cond.get("reason") == "ProgressDeadlineExceeded"
        ):
            return RolloutObservation(
                ROLLOUT_FAILED,
                f"{updated} of {wanted} new replicas started but not ready in time: "
                f"{cond.get('message') or 'progress deadline exceeded'}",
                updated,
                ready,
            )
    total = int(status.get("replicas") or 0)
    if updated >= wanted and available >= wanted and total == wanted:
        return RolloutObservation(
            ROLLOUT_COMPLETE, f"{wanted} of {wanted} replicas run the new revision", updated, ready
        )
    if deadline_seconds is not None and elapsed_seconds > deadline_seconds:
        return RolloutObservation(
            ROLLOUT_FAILED,
            f"the new revision was not available on {wanted} replica(s) within "
            f"{deadline_seconds:g} s ({updated} started)",
            updated,
            ready,
        )
    return RolloutObservation(
        ROLLOUT_PROGRESSING,
        f"{updated} of {wanted} replicas updated, {ready} ready",
        updated,
        ready,
    )
