"""Rolling updates of endpoints: how far a Deployment has rolled out a revision. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from apps.orchestration.status.pods import _conditions, _meta

ROLLOUT_PROGRESSING = "progressing"


ROLLOUT_COMPLETE = "complete"


ROLLOUT_FAILED = "failed"


@dataclass(frozen=True)
class RolloutObservation:
    state: str  # progressing, complete or failed
    message: str
    updated: int  # replicas of the new revision
    ready: int  # ready replicas in all


def _deadline_exceeded(deployment: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Deployment controller's word that the rollout missed its progress deadline."""
    return next(
        (
            cond
            for cond in _conditions(deployment)
            if cond.get("type") == "Progressing"
            and cond.get("status") == "False"
            and cond.get("reason") == "ProgressDeadlineExceeded"
        ),
        None,
    )


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
    exceeded = _deadline_exceeded(deployment)
    if exceeded is not None:
        return RolloutObservation(
            ROLLOUT_FAILED,
            f"{updated} of {wanted} new replicas started but not ready in time: "
            f"{exceeded.get('message') or 'progress deadline exceeded'}",
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
