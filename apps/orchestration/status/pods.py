"""What a workload's pods and Jobs say, read from the API server's JSON: how a container
ended (exit code, signal, out of memory), why it waits, whether it was disrupted, and the
Observation the readers of :mod:`apps.orchestration.status` return. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# Waiting reasons of a container whose image is not there: the kubelet keeps trying to pull
# it (ErrImagePull, then ImagePullBackOff between tries), so the workload gets a short grace
# (IMAGE_PULL_GRACE_SECONDS from the pod's start) before it fails; a name that can never be
# pulled (invalid, or a policy of Never with no such image on the node) fails it at once.
IMAGE_PULL_RETRIED = frozenset({"ErrImagePull", "ImagePullBackOff"})


IMAGE_NEVER_PULLED = frozenset({"ErrImageNeverPull", "InvalidImageName"})


IMAGE_PULL_GRACE_SECONDS = 60


# Waiting reasons of a container that cannot be created or started as configured: waiting will
# not help, the workload has failed.
FATAL_WAITING = {
    "CreateContainerConfigError": "the container configuration is invalid",
    "CreateContainerError": "the container cannot be created",
    "RunContainerError": "the command cannot be started",
}


# What the container runtime's words mean for a user (matched in its message), first match.
_RUNTIME_WORDS: tuple[tuple[str, str], ...] = (
    (
        "runAsNonRoot and image will run as root",
        "the image runs as root, which this platform does not allow (containers run as a "
        "non-root user): set a non-root USER in the image",
    ),
    (
        "runAsNonRoot and image has non-numeric user",
        "the image names its user by name, which Kubernetes cannot check is not root, and this "
        "platform runs containers as non-root only: give the image a numeric USER (e.g. 1000)",
    ),
    (
        "executable file not found",
        "the command is not in the image (not found on its PATH)",
    ),
    ("permission denied", "the command cannot be run (permission denied)"),
    ("read-only file system", "the program writes to the image's read-only root filesystem"),
    ("secret", "a secret it refers to is missing or lacks the key"),
    ("configmap", "a ConfigMap it refers to is missing or lacks the key"),
)


# Reasons of the restarts that spend one of the user's retries start with this: a retry after a
# failure, never a preemption (counted by the caller from the workload's events).
RETRY_PREFIX = "Retry "


GANG_RETRY_PREFIX = RETRY_PREFIX


# A Job failed while our copy of its pod does not say how the program ended yet (the watch's
# streams of Jobs and pods are not ordered): wait this long for the pod's exit code.
EXIT_CODE_WAIT_SECONDS = 30


@dataclass(frozen=True)
class Observation:
    """The state the workload should move to (None: stay), with reason and cluster times."""

    state: str | None
    reason: str
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    # A retry after a failure is under way: its number (1 for the first), and the words that
    # record it once among the workload's events (they start with RETRY_PREFIX and the number).
    retry: int = 0
    retry_reason: str = ""


def _terminated(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """How a container's last run ended (its state now, or the one before a restart)."""
    term = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get(
        "terminated"
    )
    return term if isinstance(term, Mapping) else None


def _exit_code(pods: Sequence[Mapping[str, Any]]) -> int | None:
    """The exit code of the latest pod's main container, once it has terminated."""
    latest = sorted(pods, key=lambda p: str(_meta(p).get("creationTimestamp") or ""))
    for pod in reversed(latest):
        for status in _container_statuses(pod):
            term = _terminated(status)
            if term and isinstance(term.get("exitCode"), int):
                return int(term["exitCode"])
    return None


_EXIT_CODE_IN_MESSAGE = re.compile(r"exit code (\d+)")


def _exit_code_of_condition(condition: Mapping[str, Any] | None) -> int | None:
    """The exit code a Job's failure condition names (a pod failure policy's rule: "Container
    main for pod … failed with exit code 3 matching FailJob rule …"), for pods already gone."""
    found = _EXIT_CODE_IN_MESSAGE.search(str((condition or {}).get("message") or ""))
    return int(found.group(1)) if found else None


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


def _memory_limit(pod: Mapping[str, Any], container: str) -> str | None:
    """The memory limit of a container of the pod, as people write it (8Gi, 64Mi)."""
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == container:
            limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
            return _memory_words(str(limit)) if limit else None
    return None


def _memory_words(quantity: str) -> str:
    """``8192Mi`` as ``8Gi``; other quantities as written."""
    if quantity.endswith("Mi") and quantity[:-2].isdigit():
        mib = int(quantity[:-2])
        if mib >= 1024 and mib % 1024 == 0:
            return f"{mib // 1024}Gi"
    return quantity


# Exit codes above 128 are a signal's: 128 + its number.
_SIGNALS = {6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def _exit_words(pod: Mapping[str, Any], status: Mapping[str, Any], term: Mapping[str, Any]) -> str:
    name = status.get("name")
    code = term.get("exitCode")
    why = term.get("reason") or "Error"
    if why == "OOMKilled":
        limit = _memory_limit(pod, str(name))
        return (
            f"out of memory{f' (limit {limit})' if limit else ''}: container {name} was killed "
            f"at its memory limit (OOMKilled, exit code {code})"
        )
    words = f"container {name} exited with code {code} ({why})"
    if isinstance(code, int) and code > 128 and code - 128 in _SIGNALS:
        words += f": killed by {_SIGNALS[code - 128]}"
    return words


def _latest_first(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(pods, key=lambda p: str(_meta(p).get("creationTimestamp") or ""), reverse=True)


def _terminated_reason(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """How the latest pod's program that failed ended, in words."""
    for pod in _latest_first(pods):
        for status in _container_statuses(pod):
            term = _terminated(status)
            if term and term.get("exitCode", 0) != 0:
                return _exit_words(pod, status, term)
    return None


def _waiting_since(pod: Mapping[str, Any]) -> datetime | None:
    """Since when the pod has been trying to start: its start on the node, else its
    scheduling, else its creation."""
    scheduled = next(
        (c.get("lastTransitionTime") for c in _conditions(pod) if c.get("type") == "PodScheduled"),
        None,
    )
    for value in ((pod.get("status") or {}).get("startTime"), scheduled):
        if (at := _as_dt(value)) is not None:
            return at
    return _as_dt(_meta(pod).get("creationTimestamp"))


def _image_of(pod: Mapping[str, Any], status: Mapping[str, Any]) -> str:
    for spec in (pod.get("spec") or {}).get("containers") or []:
        if spec.get("name") == status.get("name") and spec.get("image"):
            return str(spec["image"])
    return str(status.get("image") or "the image")


def _runtime_words(message: str) -> str | None:
    lowered = message.lower()
    for needle, words in _RUNTIME_WORDS:
        if needle.lower() in lowered:
            return words
    return None


@dataclass(frozen=True)
class _Waiting:
    fatal: str | None = None  # the workload has failed, in these words
    trying: str | None = None  # still trying (an image pull within its grace), in these words


def _waiting(pods: Sequence[Mapping[str, Any]], now: datetime | None) -> _Waiting:
    """Containers waiting for what will not come: an image that is not there (after
    IMAGE_PULL_GRACE_SECONDS of tries; at once when it can never be pulled), or a container the
    runtime cannot create or start as configured (its security settings, a missing secret, a
    command not in the image). ``now`` None: no grace."""
    trying = None
    for pod in pods:
        if _meta(pod).get("deletionTimestamp"):
            continue
        for status in _container_statuses(pod):
            waiting = (status.get("state") or {}).get("waiting") or {}
            reason = str(waiting.get("reason") or "")
            message = str(waiting.get("message") or "")
            detail = f" ({reason}: {message})" if message else f" ({reason})"
            if reason in IMAGE_PULL_RETRIED or reason in IMAGE_NEVER_PULLED:
                image = _image_of(pod, status)
                if reason == "InvalidImageName":
                    return _Waiting(fatal=f"the image name {image} is invalid{detail}")
                words = f"image {image} is not available on this cluster{detail}"
                since = _waiting_since(pod)
                grace_over = (
                    reason in IMAGE_NEVER_PULLED
                    or now is None
                    or since is None
                    or (now - since).total_seconds() >= IMAGE_PULL_GRACE_SECONDS
                )
                if grace_over:
                    return _Waiting(fatal=words)
                trying = (
                    "pulling the image failed; trying again for up to "
                    f"{IMAGE_PULL_GRACE_SECONDS} s: {words}"
                )
            elif reason in FATAL_WAITING:
                readable = _runtime_words(message) or FATAL_WAITING[reason]
                return _Waiting(fatal=f"{readable}{detail}")
    return _Waiting(trying=trying)


def _fatal_waiting(pods: Sequence[Mapping[str, Any]], now: datetime | None = None) -> str | None:
    return _waiting(pods, now).fatal


# kube-scheduler's DRA plugin, when no published device matches a pod's claim.
_CLAIM_NOT_ALLOCATABLE = "cannot allocate all claims"


def _unschedulable(pods: Sequence[Mapping[str, Any]]) -> str | None:
    for pod in pods:
        for cond in _conditions(pod):
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                message = str(cond.get("message") or "no node fits")
                if _CLAIM_NOT_ALLOCATABLE in message:
                    return (
                        "Unschedulable: no free device on its node matches its GPU claim (DRA): "
                        "taken outside the portal, or not published by the node's DRA driver; "
                        f"it waits until one is. Kubernetes said: {message}"
                    )
                return f"Unschedulable: {message}"
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


def _finished_at(pod: Mapping[str, Any]) -> datetime | None:
    for status in _container_statuses(pod):
        term = _terminated(status)
        if term and (at := _as_dt(term.get("finishedAt"))) is not None:
            return at
    return None


def _unsettled(pods: Sequence[Mapping[str, Any]]) -> bool:
    """Some pod is neither ended nor going: our copy of it may not show how it ended yet."""
    return any(
        (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and not _meta(p).get("deletionTimestamp")
        for p in pods
    )


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


@dataclass(frozen=True)
class ReplicaSeen:
    """One replica of an endpoint as its pod says: where it runs and in what state."""

    node: str  # "" while the pod has no node
    state: str  # in words: "running", "starting", "waiting: Unschedulable: …", "stopping"


def replicas_seen(pods: Sequence[Mapping[str, Any]]) -> list[ReplicaSeen]:
    """An endpoint's replicas as the cluster runs them (its pods, oldest first): the node the
    pod is bound to, not the one placed for it (an endpoint's replicas are not pinned)."""
    seen = []
    for pod in sorted(pods, key=lambda p: str(_meta(p).get("creationTimestamp") or "")):
        status = pod.get("status") or {}
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if _meta(pod).get("deletionTimestamp"):
            state = "stopping"
        elif status.get("phase") == "Running":
            ready = _condition(pod, "Ready") is not None
            state = "running" if ready else "running, not ready yet"
        elif (why := _unschedulable([pod])) is not None:
            state = f"waiting: {why}"
        elif status.get("phase") in ("Succeeded", "Failed"):
            state = f"ended ({status.get('phase')})"
        else:
            state = "starting"
        seen.append(ReplicaSeen(node, state))
    return seen
