"""What the request rules read (the GPU class, image, nodes, secrets, datasets and quota, as
protocols the selectors' rows meet; the Context) and what an accepted request is charged
(Charge). Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apps.budgets import core as budget_core
from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec
from apps.catalog.resources import ResourceMappingError, charged_milli
from apps.policies import core as policy_core
from apps.workloads import core
from apps.workloads.request import (
    WorkloadRequest,
)
from apps.workloads.rules.limits import DEFAULT_RESERVED_ENV, ReservedEnv


class GpuClassFacts(Protocol):
    """What the rules read of a GPU class (a catalog row, or any spec with these fields)."""

    @property
    def name(self) -> str: ...
    @property
    def sharing_mode(self) -> str: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def mig_profiles(self) -> Sequence[str]: ...
    @property
    def enabled(self) -> bool: ...
    @property
    def timeslice_replicas(self) -> int | None: ...
    @property
    def hami_split_count(self) -> int | None: ...


def class_spec_of(gpu_class: GpuClassFacts) -> GpuClassSpec:
    """The facts of a class as the catalog's plain spec (what the resource mapping reads)."""
    return catalog_core.gpu_class_spec(gpu_class)


def charged_milli_of(gpu_milli: int, gpu_class: GpuClassFacts) -> int:
    """Milli-GPU one replica is charged on ``gpu_class``: what the cluster grants it (never
    less than asked); the request itself when the class cannot express it (refused anyway)."""
    try:
        return charged_milli(gpu_milli, class_spec_of(gpu_class))
    except ResourceMappingError:
        return gpu_milli


class ImageFacts(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def enabled(self) -> bool: ...


class NodeFacts(Protocol):
    """A ready, schedulable node of the class, with what one replica may take of it."""

    @property
    def gpu_count(self) -> int: ...
    @property
    def cpu_milli(self) -> int: ...
    @property
    def memory_mib(self) -> int: ...
    @property
    def mig_layout(self) -> Sequence[str]: ...


class SecretFacts(Protocol):
    """A secret the asking person may see: the team's, or their own personal one."""

    @property
    def name(self) -> str: ...
    @property
    def owner_id(self) -> int | None: ...  # None: a team secret
    @property
    def keys(self) -> Sequence[str]: ...
    @property
    def k8s_name(self) -> str: ...


class DatasetFacts(Protocol):
    """A dataset registered for the team the request asks."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def claim(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def secret_k8s_name(self) -> str: ...
    @property
    def secret_keys(self) -> Sequence[str]: ...


class QuotaFacts(Protocol):
    @property
    def limit_milli(self) -> int: ...
    @property
    def per_user_cap_milli(self) -> int | None: ...


@dataclass(frozen=True)
class Context:
    """Where the request would run, as the selectors read it."""

    team: str
    leads: bool  # a lead of the team, or a platform admin
    gpu_class: GpuClassFacts
    image: ImageFacts
    # Ready, schedulable nodes of the class; none: capacity unknown (not synced), not absent.
    nodes: Sequence[NodeFacts] = ()
    quota: QuotaFacts | None = None
    sharing_classes: Sequence[str] = ()  # other enabled classes that share GPUs, for hints
    # The class allocates through DRA and none of its nodes publishes a device.
    dra_unpublished: bool = False
    cpu_milli: int = 0  # what one replica asks for besides GPUs
    memory_mib: int = 0
    actor_id: int | None = None  # who asks: whose personal secrets ``secrets`` holds
    secrets: Sequence[SecretFacts] = ()  # the team's and the asking person's own
    reserved_env: ReservedEnv = DEFAULT_RESERVED_ENV  # the ENV_RESERVED setting
    datasets: Sequence[DatasetFacts] = ()  # the team's
    admin: bool = False  # a platform admin asks (who can give quota themselves)
    policy: policy_core.PolicySpec | None = None  # the team's policy, if it has one
    budget: budget_core.BudgetState | None = None  # this month's budget and spend, if any
    # The image on each enabled cluster with nodes of the class (from the images they report),
    # and per cluster the catalog's images for the kind that are there (for the message).
    image_clusters: Sequence[catalog_core.ImageOnCluster] = ()
    images_there: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # The topology levels a multi-node job may ask to keep its replicas in (their names, widest
    # first: SCHEDULING_TOPOLOGY_LEVELS).
    topology_levels: Sequence[str] = ()


@dataclass(frozen=True)
class Charge:
    """What an accepted request records and is charged: ``replicas × charged_milli``, where
    ``charged_milli`` is what the cluster grants one replica of ``gpu_milli`` (DESIGN.md:
    whole time slices, the MIG profile, whole GPUs; see ``apps.catalog.resources``); and the
    secrets it refers to, resolved (what the workload records)."""

    gpu_milli: int
    replicas: int
    priority_class: str
    charged_milli: int
    secrets: tuple[dict[str, Any], ...] = ()
    datasets: tuple[dict[str, Any], ...] = ()
    # Sweeps: the trials that run at once (each trial is charged on its own while it runs).
    parallelism: int | None = None
    # As asked, else the team policy's cap and default for the kind.
    max_runtime_seconds: int | None = None
    idle_timeout_seconds: int | None = None
    # Endpoints: their settings as recorded (the model secret resolved to its stored name).
    endpoint: dict[str, Any] | None = None

    @property
    def total_milli(self) -> int:
        return self.charged_milli * self.replicas


# --- shared by the rules ---------------------------------------------------------------------


def priority_of(request: WorkloadRequest) -> str:
    return request.priority_class or core.DEFAULT_PRIORITY.get(request.kind, core.PRIORITY_BATCH)


def grid_points(grid: Mapping[str, Sequence[str]]) -> int:
    """Points of a grid (0 for an empty one)."""
    return math.prod(len(values) for values in grid.values()) if grid else 0


def put_problem(errors: dict[str, str], key: str, message: str | None) -> None:
    if message:
        errors.setdefault(key, message)
