"""The request rules' numbers and words: limits, messages, the environment names reserved."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from apps.workloads import core
from apps.workloads.request import (
    SCALE_GPU,
    SCALE_RPS,
)

MILLI = 1000
SUBMITTABLE_KINDS = (core.KIND_NOTEBOOK, core.KIND_TRAINING, core.KIND_SWEEP, core.KIND_INFERENCE)
KIND_LABELS = {
    core.KIND_NOTEBOOK: "notebook",
    core.KIND_TRAINING: "training job",
    core.KIND_SWEEP: "sweep",
    core.KIND_INFERENCE: "inference endpoint",
}
MAX_NAME_LENGTH = 100
# Unicode categories a name may not hold: format characters (bidirectional overrides and
# isolates, zero-width joiners and marks), line and paragraph separators, unassigned and
# private-use code points, lone surrogates.
HIDDEN_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Cn", "Co", "Cs"})
MAX_GPU_MILLI = 64 * MILLI  # per replica
MAX_NODES = 64  # replicas of a training job
MAX_GRID_POINTS = 256
MAX_GRID_VALUE_LENGTH = 256
# Trials of a sweep that run at once unless the request says otherwise (at most its trials).
DEFAULT_PARALLELISM = 4
MAX_ENV_VARS = 64
MAX_ENV_BYTES = 32 * 1024  # names and values together, UTF-8
MAX_WORDS = 200  # of a command, of its arguments
MAX_WORD_LENGTH = 4096
RUNTIME_SECONDS = (60, 30 * 24 * 3600)
IDLE_TIMEOUT_SECONDS = (5 * 60, 7 * 24 * 3600)
RETRIES = (0, 10)
MAX_SECRET_REFS = 16
MAX_DATASET_REFS = 16
SECRET_SCOPES = ("team", "personal")  # apps.credentials.core.SCOPES

# Messages a door also shows itself, for what it cannot even parse or finds missing.
NAME_MISSING = "Give the workload a name."
GRID_MISSING = "A sweep needs a parameter grid: at least one parameter and its values."
COMMAND_MISSING = (
    "A training job or sweep needs a command: the program to run, e.g. python train.py."
)
AMOUNT_NOT_WHOLE = "The GPU amount must be a whole number of milli-GPU (1000 = one GPU)."
REPLICAS_NOT_WHOLE = "Replicas must be a whole number."
RUNTIME_OUT_OF_RANGE = "The maximum runtime must be between 1 minute and 30 days."
IDLE_TIMEOUT_OUT_OF_RANGE = "The idle timeout must be between 5 minutes and 7 days."
RETRIES_OUT_OF_RANGE = f"Retries must be a whole number from {RETRIES[0]} to {RETRIES[1]}."

IMAGE_NOTEBOOK = "notebook"  # catalog.Image.Kind values
IMAGE_TRAINING = "training"
IMAGE_SERVING = "serving"

# Inference endpoints.
ENDPOINT_PORTS = (1024, 65535)
MAX_ENDPOINT_REPLICAS = 16
MAX_HEALTH_PATH_LENGTH = 200
HEALTH_PATH_RE = re.compile(r"/[A-Za-z0-9/_.~%-]*")
SCALE_TARGET_BOUNDS = {SCALE_RPS: (0.01, 100_000.0), SCALE_GPU: (1.0, 100.0)}
IDLE_MINUTES = (5, 24 * 60)
MODEL_URI_SCHEMES = ("s3", "gs", "https", "hf")
MAX_MODEL_REF_LENGTH = 1024
TEAM_VOLUME_MOUNT = "/team"  # where the team's volume and datasets are mounted (manifests)
DATASETS_MOUNT = "/datasets"
ENDPOINT_PRIORITY_MEMBERS = (
    "An inference endpoint runs in the production class, which team leads and platform "
    "admins may use; ask a lead of the team to deploy it."
)

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SWEEP_ENV_PREFIX = "SWEEP_"
# Set by the GPU runtime (NVIDIA container toolkit, device plugins, HAMi's in-container
# limiter, MPS) or by the platform: a request that set them could reach other GPUs, lift its
# memory or compute limits, or disguise its outputs and restarts.
# The platform's own variables are always reserved; the runtime's list is a setting
# (ENV_RESERVED) with this default.
PLATFORM_ENV_PREFIX = "GPUPAAS_"
DEFAULT_RESERVED_ENV_PATTERNS = (
    "NVIDIA_*",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DISABLE_CONTROL",
    "CUDA_DEVICE_SM_LIMIT",
    "CUDA_DEVICE_MEMORY_*",
    "CUDA_MPS_*",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
)


@dataclass(frozen=True)
class ReservedEnv:
    """Names a request may not set: exact names and name prefixes (a pattern ``PREFIX*``)."""

    names: frozenset[str]
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, patterns: Sequence[str]) -> ReservedEnv:
        names = {p for p in patterns if not p.endswith("*")}
        prefixes = [p[:-1] for p in patterns if p.endswith("*") and p[:-1]]
        return cls(frozenset(names), (*prefixes, PLATFORM_ENV_PREFIX))

    def covers(self, name: str) -> bool:
        return name in self.names or name.startswith(self.prefixes)

    def shown(self) -> str:
        patterns = sorted(self.names) + [f"{p}*" for p in self.prefixes]
        return ", ".join(patterns[:8]) + (", …" if len(patterns) > 8 else "")


DEFAULT_RESERVED_ENV = ReservedEnv.of(DEFAULT_RESERVED_ENV_PATTERNS)
