"""What the cluster says about a workload, as a workload state and a readable reason. Pure.

``pods`` reads what pods and Jobs say (how a container ended, why it waits) and holds the
Observation every reader returns; ``jobs`` turns them into the state of a one-pod job, a
sweep's trial, a notebook or an endpoint; ``gangs`` into that of a multi-node training job;
``rollouts`` follows an endpoint's rolling update. What other modules use is importable
from here.
"""

from __future__ import annotations

from apps.orchestration.status.gangs import (
    observe_gang,
)
from apps.orchestration.status.jobs import (
    observe_endpoint,
    observe_job_workload,
    observe_notebook,
)
from apps.orchestration.status.pods import (
    EXIT_CODE_WAIT_SECONDS,
    FATAL_WAITING,
    GANG_RETRY_PREFIX,
    IMAGE_NEVER_PULLED,
    IMAGE_PULL_GRACE_SECONDS,
    IMAGE_PULL_RETRIED,
    RETRY_PREFIX,
    Observation,
    ReplicaSeen,
    replicas_seen,
)
from apps.orchestration.status.rollouts import (
    ROLLOUT_COMPLETE,
    ROLLOUT_FAILED,
    ROLLOUT_PROGRESSING,
    RolloutObservation,
    observe_rollout,
)

__all__ = [
    "EXIT_CODE_WAIT_SECONDS",
    "FATAL_WAITING",
    "GANG_RETRY_PREFIX",
    "IMAGE_NEVER_PULLED",
    "IMAGE_PULL_GRACE_SECONDS",
    "IMAGE_PULL_RETRIED",
    "RETRY_PREFIX",
    "ROLLOUT_COMPLETE",
    "ROLLOUT_FAILED",
    "ROLLOUT_PROGRESSING",
    "Observation",
    "ReplicaSeen",
    "RolloutObservation",
    "observe_endpoint",
    "observe_gang",
    "observe_job_workload",
    "observe_notebook",
    "observe_rollout",
    "replicas_seen",
]
