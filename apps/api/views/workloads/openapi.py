"""OpenAPI parameters and examples the workload views of the API share."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiParameter,
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (a UUID). A retried request with the same key and body returns the "
        "workload the first one created, with `Idempotent-Replayed: true`, instead of "
        "submitting twice. Keys are per user and kept 24 hours."
    ),
)

DRY_RUN_PARAMETER = OpenApiParameter(
    "dry_run",
    bool,
    description=(
        "true: submit nothing; answer 200 with what it would be recorded and charged as and "
        "the scheduler's verdict (starts now / would preempt / waits), as "
        "POST /api/v1/workloads/validate/ does; or the 400 a submission would get."
    ),
)


WORKLOAD_EXAMPLE = {
    "id": 42,
    "name": "resnet50-baseline",
    "kind": "training",
    "state": "queued",
    "team": "vision",
    "owner": "alice",
    "gpu_class": "H100-80GB",
    "image": "PyTorch training",
    "gpu_milli": 2000,
    "charged_milli": 2000,
    "replicas": 2,
    "total_milli": 4000,
    "priority_class": "training",
    "requeue_on_preemption": True,
    "command": ["torchrun", "train.py"],
    "args": ["--epochs", "90"],
    "env": {"WANDB_MODE": "offline"},
    "max_runtime_seconds": 86400,
    "idle_timeout_seconds": None,
    "retries": 1,
    "params": {},
    "sweep": None,
    "trial_index": None,
    "exit_code": None,
    "last_reason": "no H100-80GB free; 3 ahead of you",
    "queue_position": 4,
    "estimated_start_at": "2025-01-01T12:30:00Z",
    "created_at": "2025-01-01T12:00:00Z",
    "queued_at": "2025-01-01T12:00:01Z",
    "admitted_at": None,
    "started_at": None,
    "finished_at": None,
    "updated_at": "2025-01-01T12:00:01Z",
}

NOTEBOOK_SUSPENDED = {
    **WORKLOAD_EXAMPLE,
    "id": 17,
    "name": "explore",
    "kind": "notebook",
    "state": "suspended",
    "gpu_milli": 500,
    "charged_milli": 500,
    "replicas": 1,
    "total_milli": 500,
    "priority_class": "development",
    "command": [],
    "args": [],
    "idle_timeout_seconds": 3600,
    "last_reason": "Suspended by alice; your files are kept.",
    "queue_position": None,
    "estimated_start_at": None,
}


TRIALS_EXAMPLE = {
    "sweep": {
        **WORKLOAD_EXAMPLE,
        "id": 50,
        "name": "lr-sweep",
        "kind": "sweep",
        "state": "running",
        "gpu_milli": 250,
        "charged_milli": 250,
        "replicas": 2,
        "total_milli": 500,
        "priority_class": "batch",
        "command": ["python", "train.py"],
        "args": ["--lr={lr}", "--epochs", "10"],
        "params": {"grid": {"lr": ["0.1", "0.01"]}, "parallelism": 1},
        "last_reason": "1 of 2 trials running, 1 done, 0 waiting.",
        "queue_position": None,
        "estimated_start_at": None,
    },
    "parallelism": 1,
    "counts": {"succeeded": 1, "running": 1},
    "trials": [
        {
            "id": 51,
            "index": 0,
            "params": {"lr": "0.1"},
            "command": ["python", "train.py"],
            "args": ["--lr=0.1", "--epochs", "10"],
            "state": "succeeded",
            "exit_code": 0,
            "started_at": "2025-01-01T12:00:05Z",
            "finished_at": "2025-01-01T12:20:05Z",
            "runtime_seconds": 1200,
            "attempts": 1,
            "last_metrics_line": '{"epoch": 10, "loss": 0.31, "acc": 0.92}',
            "last_metrics_at": "2025-01-01T12:20:04Z",
            "reason": "completed",
        },
        {
            "id": 52,
            "index": 1,
            "params": {"lr": "0.01"},
            "command": ["python", "train.py"],
            "args": ["--lr=0.01", "--epochs", "10"],
            "state": "running",
            "exit_code": None,
            "started_at": "2025-01-01T12:20:10Z",
            "finished_at": None,
            "runtime_seconds": 300,
            "attempts": 1,
            "last_metrics_line": '{"epoch": 3, "loss": 0.52}',
            "last_metrics_at": "2025-01-01T12:25:01Z",
            "reason": "running",
        },
    ],
}
