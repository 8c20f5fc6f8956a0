"""How far a Deployment has rolled out a revision, from its status alone (plain dicts)."""

from __future__ import annotations

from typing import Any

from apps.orchestration import status as st

ANNOTATION = "gpupaas.io/revision"


def deployment(revision: int = 2, generation: int = 5, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {
            "replicas": 2,
            "template": {"metadata": {"annotations": {ANNOTATION: str(revision)}}},
        },
        "status": {"observedGeneration": generation, **status},
    }


def seen(d: dict[str, Any] | None, **kw: Any) -> st.RolloutObservation:
    return st.observe_rollout(d, revision=2, revision_annotation=ANNOTATION, **kw)


def test_complete_when_every_replica_runs_the_revision_and_no_old_one_is_left() -> None:
    done = deployment(replicas=2, updatedReplicas=2, readyReplicas=2, availableReplicas=2)
    assert seen(done).state == st.ROLLOUT_COMPLETE
    surge = deployment(replicas=3, updatedReplicas=2, readyReplicas=3, availableReplicas=3)
    assert seen(surge).state == st.ROLLOUT_PROGRESSING


def test_failed_when_the_controller_or_the_platform_deadline_says_so() -> None:
    stuck = deployment(
        replicas=3,
        updatedReplicas=1,
        readyReplicas=2,
        availableReplicas=2,
        conditions=[
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
        ],
    )
    assert seen(stuck).state == st.ROLLOUT_FAILED
    churning = deployment(replicas=3, updatedReplicas=1, readyReplicas=2, availableReplicas=2)
    assert seen(churning, elapsed_seconds=30, deadline_seconds=60).state == st.ROLLOUT_PROGRESSING
    late = seen(churning, elapsed_seconds=61, deadline_seconds=60)
    assert late.state == st.ROLLOUT_FAILED and "within 60 s" in late.message


def test_not_yet_applied_or_observed_is_still_progressing() -> None:
    assert seen(None).state == st.ROLLOUT_PROGRESSING
    old = deployment(revision=1, replicas=2, updatedReplicas=2, availableReplicas=2)
    assert seen(old, elapsed_seconds=999, deadline_seconds=60).state == st.ROLLOUT_PROGRESSING
    unobserved = deployment(replicas=2, updatedReplicas=2, availableReplicas=2)
    unobserved["status"]["observedGeneration"] = 4
    assert seen(unobserved).state == st.ROLLOUT_PROGRESSING
