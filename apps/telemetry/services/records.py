"""The plain records of an ingestion pass: what it reports, the workloads that held GPUs, their
usage rows and daily increments as plain data (no model instances in the hot loop)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from apps.telemetry import core
from apps.workloads import core as wl
from apps.workloads.models import Workload

PodIndex = Mapping[tuple[str, str], core.PodAllocation]
ACTED_KINDS = (wl.KIND_NOTEBOOK, wl.KIND_TRAINING, wl.KIND_SWEEP)
ENDED_HOLDING_STATES = (wl.SUSPENDED, wl.PREEMPTED)


@dataclass
class IngestResult:
    skipped: bool = False
    window_seconds: float = 0.0
    series: int = 0
    workloads: int = 0
    measured: int = 0
    warned: list[int] = field(default_factory=list)
    suspended: list[int] = field(default_factory=list)
    flagged: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Held:
    """A workload that held GPUs in the window, as plain data (thousands per pass)."""

    pk: int
    name: str
    kind: str
    state: str
    team_id: int
    owner_id: int
    gpu_class_id: int
    gpu_milli: int
    charged_milli: int
    replicas: int
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    cluster_id: int | None  # where it runs: a burst cluster may price GPU-hours its own way
    # Its own idle timeout (asked for, or its team policy's default); None: the idle policy's.
    idle_timeout_seconds: int | None = None

    @property
    def total_milli(self) -> int:
        """What it holds and is charged: what the cluster grants (``replicas × charged_milli``)."""
        return self.charged_milli * self.replicas

    def get_kind_display(self) -> str:
        return str(dict(Workload.Kind.choices).get(self.kind, self.kind))


HELD_FIELDS = tuple(f.name for f in Held.__dataclass_fields__.values())


@dataclass
class UsageState:
    """A workload's WorkloadUsage row as plain data (no model instances in the hot loop)."""

    workload_id: int
    allocated_gpu_seconds: float = 0.0
    used_gpu_seconds: float = 0.0
    measured_seconds: float = 0.0
    last_utilisation: float | None = None
    last_sample_at: datetime | None = None
    pods: list[Any] = field(default_factory=list)
    idle_since: datetime | None = None
    warned_at: datetime | None = None
    flagged_at: datetime | None = None


@dataclass
class DayIncrement:
    workload: Held
    day: date
    allocated: float
    used: float
    unmeasured: float
    cost: Decimal


USAGE_FIELDS = (
    "allocated_gpu_seconds",
    "used_gpu_seconds",
    "measured_seconds",
    "last_utilisation",
    "last_sample_at",
    "pods",
    "idle_since",
    "warned_at",
    "flagged_at",
)
