"""Plain data in and out of the scheduler's pure core. No ORM, no I/O.

Amounts are milli-GPU (1000 = one GPU) unless a name says otherwise. Teams are named by
their (unique) name and users by their username, so reasons can be written from the data
alone. Times are timezone-aware datetimes supplied by the caller: the core never reads a
clock, so the same snapshot always gives the same result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from apps.catalog.core import GpuClassSpec
from apps.quotas.core import Grant
from apps.reservations.core import Booking

# The priority classes and their order have one home, apps.workloads.core; the scheduler
# keeps its short names for them.
from apps.workloads.core import PREEMPTION_GRACE_SECONDS, grace_seconds_for
from apps.workloads.core import PRIORITY_BATCH as BATCH
from apps.workloads.core import PRIORITY_DEVELOPMENT as DEVELOPMENT
from apps.workloads.core import PRIORITY_ORDER as PRIORITY_ORDER
from apps.workloads.core import PRIORITY_PRODUCTION as PRODUCTION
from apps.workloads.core import PRIORITY_TRAINING as TRAINING
from apps.workloads.core import priority_rank as priority_rank

RULE_PRIORITY = "priority-within-team"
RULE_RECLAIM = "guarantee-reclaim"


@dataclass(frozen=True)
class NodeSpec:
    """A schedulable, ready GPU node with its allocatable CPU and memory."""

    name: str
    cluster: str
    gpu_class: str
    gpu_count: int
    cpu_milli: int
    memory_mib: int
    mig_layout: tuple[str, ...] = ()
    gpu_uuids: tuple[str, ...] = ()
    # GPUs (indices) that failed their health check: they take no work, the rest of the node
    # does; what runs on them stays charged until it ends or is moved off.
    down_gpus: tuple[int, ...] = ()
    # Its topology domains, widest level first: (level, domain) pairs such as
    # (("block", "b1"), ("rack", "r3"), ("nvlink", "c7")) from the node's labels
    # (settings.SCHEDULING_TOPOLOGY_LEVELS); a level whose label it lacks has domain "".
    topology: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TopologyAsk:
    """A gang's wish that its replicas share one domain of ``level`` (a configured level's
    name, e.g. "rack"): ``required`` waits until one domain can hold them all, otherwise the
    gang prefers one and spreads when none can."""

    level: str
    required: bool = False


@dataclass(frozen=True)
class ReplicaPlacement:
    """Where one replica runs: a node, GPU indices on it, and what it takes of each GPU.

    ``units`` is per GPU: milli-GPU for ``whole`` and ``hami`` classes, time-slice replicas
    for ``timeslice`` classes, 0 for ``mig`` (which takes the instance ``mig_slot`` of the
    GPU's layout, of profile ``mig_profile``).
    """

    node: str
    gpus: tuple[int, ...]
    units: int
    mig_profile: str | None = None
    mig_slot: int | None = None


@dataclass(frozen=True)
class Placement:
    cluster: str
    replicas: tuple[ReplicaPlacement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({r.node for r in self.replicas}))


@dataclass(frozen=True)
class RunningWorkload:
    """An admitted, starting or running workload and the GPUs it holds."""

    id: int
    team: str
    owner: str
    gpu_class: str
    priority: str
    gpu_milli: int
    replicas: int
    admitted_at: datetime
    placement: Placement | None
    borrowed: bool = False
    cpu_milli: int = 0
    memory_mib: int = 0
    max_runtime_seconds: int | None = None
    name: str = ""
    requeue_on_preemption: bool = True
    # What one replica is charged (what the cluster grants, ≥ gpu_milli); None: gpu_milli.
    charged_milli: int | None = None
    # A trial of this sweep (Snapshot.parallelism caps how many of a sweep hold GPUs).
    sweep: int | None = None
    # The last checkpoint it reported (docs/checkpoints.md), None when it reported none:
    # preemption chooses the victims that lose the least work since theirs.
    checkpoint_at: datetime | None = None
    checkpoint_step: int | None = None

    @property
    def total_milli(self) -> int:
        """What the workload counts against quotas and fair share: replicas × the charge."""
        return (self.charged_milli or self.gpu_milli) * self.replicas


@dataclass(frozen=True)
class WaitingWorkload:
    """A pending or queued workload. ``submitted_at`` orders equals: older first."""

    id: int
    team: str
    owner: str
    gpu_class: str
    priority: str
    gpu_milli: int
    replicas: int
    submitted_at: datetime
    cpu_milli: int = 0
    memory_mib: int = 0
    max_runtime_seconds: int | None = None
    name: str = ""
    # What one replica is charged (what the cluster grants, ≥ gpu_milli); None: gpu_milli.
    charged_milli: int | None = None
    # A trial of this sweep (Snapshot.parallelism caps how many of a sweep hold GPUs).
    sweep: int | None = None
    # A gang's topology ask (its replicas in one rack, block, NVLink domain); None: any.
    topology: TopologyAsk | None = None

    @property
    def total_milli(self) -> int:
        """What the workload counts against quotas and fair share: replicas × the charge."""
        return (self.charged_milli or self.gpu_milli) * self.replicas


@dataclass(frozen=True)
class PreemptedWorkload:
    id: int
    preempted_at: datetime
    requeue: bool
    priority: str = ""  # its class decides its grace period
    # A trial of this sweep: until its grace is over it still holds a slot of the sweep.
    sweep: int | None = None
    # What it still holds while its pods terminate (its placement and its charge): capacity
    # freed by a preemption is held, through the grace period, for the workload it was freed
    # for (admitted onto it in the cycle of the preemption, as kube-scheduler holds a
    # nominated node); nothing else is admitted onto it until the workload leaves the
    # preempted state (requeued, ended or cancelled). None: it held nothing placed.
    held: RunningWorkload | None = None


@dataclass(frozen=True)
class Quota:
    team: str
    gpu_class: str
    guaranteed_milli: int
    limit_milli: int
    per_user_cap_milli: int | None = None


@dataclass(frozen=True)
class TypicalRequest:
    """One shape of request and how often it occurs (weights need not sum to 1).

    ``gpu_milli`` is per GPU (≤ 1000) and ``gpus`` the GPUs per replica: a fraction is
    (``gpu_milli`` < 1000, 1), two whole GPUs (1000, 2), a CPU-only pod (0, 0).
    """

    gpu_milli: int
    gpus: int
    cpu_milli: int = 0
    weight: float = 1.0


def _frozen_map(value: Mapping[str, int] | None = None) -> Mapping[str, int]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class Policy:
    """Tunables of a cycle (from settings in production, literal in tests)."""

    # Seconds a workload of each class runs before it may be preempted, so that a job
    # makes progress instead of being preempted again and again.
    min_runtime_seconds: Mapping[str, int] = field(
        default_factory=lambda: _frozen_map(
            {PRODUCTION: 0, TRAINING: 600, DEVELOPMENT: 300, BATCH: 120}
        )
    )
    # Seconds a preempted workload gets to checkpoint before its GPUs are free: per priority
    # class (workloads.core.PREEMPTION_GRACE_SECONDS, as configured), or one number for all.
    grace_seconds: int | Mapping[str, int] = field(
        default_factory=lambda: _frozen_map(PREEMPTION_GRACE_SECONDS)
    )
    # Weight of the decayed past usage against the current allocation in fair share.
    past_usage_weight: float = 1.0
    # How many waiting workloads get advice (the rest get a reason and an estimate).
    advice_limit: int = 500

    def grace_for(self, priority: str) -> int:
        """The grace period a preempted workload of ``priority`` gets."""
        if isinstance(self.grace_seconds, int):
            return self.grace_seconds
        return self.grace_seconds.get(priority, grace_seconds_for(priority))


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    classes: tuple[GpuClassSpec, ...]
    nodes: tuple[NodeSpec, ...]
    running: tuple[RunningWorkload, ...]
    waiting: tuple[WaitingWorkload, ...]
    quotas: tuple[Quota, ...]
    # Decayed average of each (team, class)'s past allocation in milli-GPU (fairshare.py).
    past_usage_milli: Mapping[tuple[str, str], float] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # The same per (owner, team, class): orders a team's waiting work between its members.
    member_past_usage_milli: Mapping[tuple[str, str, str], float] = field(
        default_factory=lambda: MappingProxyType({})
    )
    preempted: tuple[PreemptedWorkload, ...] = ()
    # Per class: the request shapes fragmentation is measured against. Derived from the
    # snapshot's own workloads when absent.
    typical: Mapping[str, tuple[TypicalRequest, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # Per sweep: how many of its trials may hold GPUs at once (running, admitted in this
    # cycle, or preempted and still in their grace period). A sweep not named: no cap.
    parallelism: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    # Approved quota grants and reservations (governance.py): those active at ``now`` add to
    # the quotas; the others are ignored, so grants end and windows open by themselves.
    grants: tuple[Grant, ...] = ()
    reservations: tuple[Booking, ...] = ()
    # Clusters that take work only as a burst, and the waiting workloads that may burst now
    # (their team allows it and they waited longer than their class's burst wait).
    burst_clusters: frozenset[str] = frozenset()
    may_burst: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Admission:
    workload_id: int
    placement: Placement
    borrowed: bool
    reason: str
    # The workloads preempted for it: it starts (its objects are created) only once their
    # pods are gone from the cluster, so that it never runs ahead of the cluster's quota.
    waits_for: tuple[int, ...] = ()


@dataclass(frozen=True)
class Preemption:
    workload_id: int
    by_workload_id: int
    rule: str
    reason: str
    requeue: bool
    grace_seconds: int


@dataclass(frozen=True)
class Suggestion:
    """Advice that changes the request: this amount of this class would be admitted now on
    the same snapshot (``text`` says so in words and is one of the ``advice`` lines)."""

    gpu_class: str
    gpu_milli: int
    text: str


@dataclass(frozen=True)
class Waiting:
    workload_id: int
    position: int
    reason: str
    estimated_start: datetime | None
    advice: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()


@dataclass(frozen=True)
class Requeue:
    workload_id: int
    reason: str


@dataclass(frozen=True)
class PreemptionEnd:
    """A preempted workload whose owner chose not to requeue it: it ends after its grace."""

    workload_id: int
    reason: str


@dataclass(frozen=True)
class Rejection:
    """A waiting workload that can never run as asked (e.g. the quota shrank below it)."""

    workload_id: int
    reason: str


@dataclass(frozen=True)
class CycleResult:
    admissions: tuple[Admission, ...]
    preemptions: tuple[Preemption, ...]
    waiting: tuple[Waiting, ...]
    requeues: tuple[Requeue, ...] = ()
    ended: tuple[PreemptionEnd, ...] = ()
    # Running workloads whose borrowed flag changes (e.g. now within the guarantee).
    borrowed_changes: tuple[tuple[int, bool], ...] = ()
    rejections: tuple[Rejection, ...] = ()


# Why a waiting workload was not admitted this cycle (the cycle decides, estimate.py explains).
BLOCK_QUOTA = "quota"
BLOCK_USER = "user"
BLOCK_CAPACITY = "capacity"
BLOCK_CLASS = "class"
# Production (inference endpoints) runs only on the team's guarantee, never borrowed.
BLOCK_GUARANTEE = "guarantee"


@dataclass(frozen=True)
class Blocked:
    """A waiting workload the cycle did not admit: why (``kind``, a ``BLOCK_*``), its position
    in the queue and how many wait ahead of it; estimate.py turns it into a reason."""

    workload: WaitingWorkload
    kind: str
    position: int
    ahead: int
    detail: str
    # Its owner's usage of the team's class, with their own waiting work ahead of it
    # (fairshare.member_keys): what orders it among its teammates' work.
    member_milli: float = 0.0
