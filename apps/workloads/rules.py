"""What a workload request may be: the one rule set of every door. Pure.

The portal form, the API serializer and the CLI (through the API's dry run) only parse what
the user typed into a :class:`WorkloadRequest`; ``workload_submit`` reads the
:class:`Context` (who asks, the GPU class, the image, the class's nodes, the team's quota)
and asks :func:`request_problems`, whose answer — field → message — is what every door
shows. The same request is therefore accepted or refused with the same message whatever
the door (DESIGN.md, "Accounting").

The rules, by field:

- ``kind``: notebook, training or sweep.
- ``name``: 1–100 characters, no control characters, no invisible formatting characters
  (bidirectional overrides and isolates, zero-width marks, line separators).
- ``gpu_milli`` per replica: a positive whole number of milli-GPU; more than one GPU only
  in whole GPUs; per sharing mode: ``whole`` gives whole GPUs only (a fraction is refused
  with the rounded-up amount to ask for), ``mig`` at most one GPU and a profile of the class
  must hold it, ``timeslice`` and ``hami`` take any fraction. No node of the class may be
  too small for one replica, and the request may not exceed the team's limit or the
  per-user cap.
- ``replicas``: notebooks one; training jobs 1–64 nodes, fractions for one replica only;
  sweeps one replica per point of the grid, derived (each trial its own unit, charged).
- ``grid`` (sweeps only): 1–256 points; parameter names as environment variable names
  (each point sees SWEEP_<NAME>), distinct in any case; values of up to 256 characters.
- ``env``: at most 64 variables and 32 KiB; names ``[A-Za-z_][A-Za-z0-9_]*`` (ASCII), not
  the GPU runtime's or the platform's (NVIDIA_*, CUDA_VISIBLE_DEVICES, LD_PRELOAD,
  GPUPAAS_*, …), nor SWEEP_* in a sweep.
- ``ranges`` and ``samples`` (sweeps only, instead of a grid): ``samples`` (1–256) points drawn
  from ``name: [low, high]`` or ``[low, high, scale]`` (scale linear, log or int; log needs
  low > 0) by a generator seeded with ``seed`` (0 to 2³²−1; recorded, drawn when absent).
- ``parallelism`` (sweeps only): trials that run at once, 1 to the number of trials (default
  4, at most the trials); what runs at once must fit the team's limit and the per-user cap.
- ``command``/``args``: a notebook takes neither; a training job or sweep needs a command.
- ``max_runtime_seconds`` 1 minute – 30 days, ``idle_timeout_seconds`` 5 minutes – 7 days,
  ``retries`` 0–10.
- ``secrets``: at most 16 references to secrets of the team (DESIGN.md, "Data and secrets"),
  each ``{name, env, key}``: ``env`` set, the variable takes the value of ``key`` (which may be
  left out when the secret has one key); ``env`` left out, every key of the secret becomes a
  variable of its name. A team secret any member may use; a personal secret only its owner
  (a clone of a teammate's request that uses one is refused). Variable names follow the
  ``env`` rules and may not repeat a plain variable or another reference.
- ``datasets``: at most 16 names of datasets registered for the team (DESIGN.md, "Data and
  secrets"), each once; a claim dataset is mounted read-only at /datasets/<name>, an
  object-store dataset is named in the environment. A name the team has not registered (another
  team's dataset included) is refused.
- ``priority_class``: members up to their kind's class (development for notebooks, training
  for jobs, batch for sweeps); team leads and admins any class, production included.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from apps.budgets import core as budget_core
from apps.catalog import core as catalog_core
from apps.catalog.core import GpuClassSpec
from apps.catalog.resources import ResourceMappingError, charged_milli
from apps.policies import core as policy_core
from apps.quotas.core import format_milli
from apps.workloads import core

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
DEFAULT_ENDPOINT_PORT = 8000
DEFAULT_HEALTH_PATH = "/health"
ENDPOINT_PORTS = (1024, 65535)
MAX_ENDPOINT_REPLICAS = 16
MAX_HEALTH_PATH_LENGTH = 200
HEALTH_PATH_RE = re.compile(r"/[A-Za-z0-9/_.~%-]*")
SCALE_RPS = "rps"  # requests per second per replica
SCALE_GPU = "gpu"  # GPU utilisation in percent
SCALE_METRICS = (SCALE_RPS, SCALE_GPU)
DEFAULT_SCALE_TARGETS = {SCALE_RPS: 10.0, SCALE_GPU: 70.0}
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


# --- what the rules read ---------------------------------------------------------------------


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
    return GpuClassSpec(
        name=gpu_class.name,
        sharing_mode=gpu_class.sharing_mode,
        memory_mib=gpu_class.memory_mib,
        timeslice_replicas=gpu_class.timeslice_replicas,
        mig_profiles=tuple(gpu_class.mig_profiles or ()),
        hami_split_count=gpu_class.hami_split_count,
        enabled=gpu_class.enabled,
    )


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


@dataclass(frozen=True)
class SecretRef:
    """A request's reference to a secret, by name. ``scope`` and ``owner`` come only from a
    recorded request (a clone): the secret it used then, not whatever has that name now."""

    name: str
    env: str = ""  # empty: every key of the secret becomes a variable of its name
    key: str = ""  # empty: the secret's only key
    scope: str = ""  # "", "team" or "personal"
    owner: int | None = None  # a personal secret's owner, as recorded

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> SecretRef:
        """From a door's or a recorded request's mapping; values are checked by the rules."""
        owner = value.get("owner")
        return cls(
            name=value.get("name", ""),
            env=value.get("env") or "",
            key=value.get("key") or "",
            scope=value.get("scope") or "",
            owner=owner if _whole_number(owner) else None,
        )


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
class EndpointRequest:
    """What an inference endpoint asks for besides a workload's fields (values unchecked)."""

    port: Any = DEFAULT_ENDPOINT_PORT
    health_path: Any = DEFAULT_HEALTH_PATH
    min_replicas: Any = 1
    max_replicas: Any = 1
    model_path: Any = ""  # a path on the team volume or a dataset the request names
    model_uri: Any = ""  # or an object-store URI
    model_secret: Any = ""  # a team or personal secret with the store's keys
    scale_metric: Any = SCALE_RPS
    scale_target: Any = None  # requests/s per replica, or GPU utilisation in percent
    idle_minutes: Any = None  # scale to zero after this long without requests

    @classmethod
    def of(cls, value: Mapping[str, Any]) -> EndpointRequest:
        """From a door's mapping (unknown keys are dropped; absent ones take defaults)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in value.items() if k in names and v is not None})

    def recorded(self) -> dict[str, Any]:
        """As the workload records it (for an accepted request)."""
        return {
            "port": self.port,
            "health_path": self.health_path,
            "min_replicas": self.min_replicas,
            "max_replicas": self.max_replicas,
            "model_path": self.model_path,
            "model_uri": self.model_uri,
            "model_secret": self.model_secret,
            "scale_metric": self.scale_metric,
            "scale_target": scale_target_of(self),
            "idle_minutes": self.idle_minutes,
        }


@dataclass(frozen=True)
class WorkloadRequest:
    """A request as a door parsed it. Values are checked here, not trusted: a door passes on
    whatever it could parse (an int that is negative, a name with a newline, …)."""

    kind: str
    name: str
    gpu_milli: int
    replicas: int | None = None  # None: one (a sweep: the points of its grid)
    priority_class: str | None = None  # None: the kind's class
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    grid: Mapping[str, Sequence[str]] | None = None
    max_runtime_seconds: int | None = None
    idle_timeout_seconds: int | None = None
    retries: int = 0
    # Preempted: back in the queue after the grace period (True) or end there (False).
    requeue_on_preemption: bool = True
    secrets: Sequence[SecretRef] = ()
    datasets: Sequence[str] = ()  # names of the team's datasets
    # Sweeps: how many trials run at once (None: DEFAULT_PARALLELISM, at most the trials).
    parallelism: int | None = None
    # Sweeps, instead of a grid: ``samples`` points drawn from ``ranges`` with ``seed``.
    ranges: Mapping[str, Sequence[Any]] | None = None
    samples: int | None = None
    seed: int | None = None
    # Inference endpoints: port, health path, replicas, model source and scaling.
    endpoint: EndpointRequest | None = None

    @property
    def sampled(self) -> bool:
        return self.ranges is not None or self.samples is not None


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
    cpu_milli: int = 0  # what one replica asks for besides GPUs
    memory_mib: int = 0
    actor_id: int | None = None  # who asks: whose personal secrets ``secrets`` holds
    secrets: Sequence[SecretFacts] = ()  # the team's and the asking person's own
    reserved_env: ReservedEnv = DEFAULT_RESERVED_ENV  # the ENV_RESERVED setting
    datasets: Sequence[DatasetFacts] = ()  # the team's
    admin: bool = False  # a platform admin asks (who can give quota themselves)
    policy: policy_core.PolicySpec | None = None  # the team's policy, if it has one
    budget: budget_core.BudgetState | None = None  # this month's budget and spend, if any


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


# --- the rule set ------------------------------------------------------------------------------


def request_problems(request: WorkloadRequest, context: Context) -> dict[str, str]:
    """Field → message for every rule the request breaks (one message per field)."""
    errors: dict[str, str] = {}
    kind = request.kind
    if kind not in SUBMITTABLE_KINDS:
        errors["kind"] = (
            f"“{kind}” is not a kind of workload you can request; use one of: "
            f"{', '.join(SUBMITTABLE_KINDS)}."
        )
    _put(errors, "name", name_problem(request.name))
    replicas = replicas_of(request)
    for key, message in amount_problems(kind, request.gpu_milli, replicas).items():
        _put(errors, key, message)
    if (
        kind == core.KIND_SWEEP
        and replicas is not None
        and request.replicas is not None
        and request.replicas != replicas
    ):
        _put(
            errors,
            "replicas",
            f"A sweep runs one replica per point of its grid ({replicas} here); leave "
            "replicas out.",
        )
    if kind == core.KIND_SWEEP and request.sampled:
        if request.grid:
            _put(errors, "grid", "Give either a grid or ranges to sample, not both.")
        for key, message in sampling_problems(request).items():
            _put(errors, key, message)
    else:
        _put(errors, "grid", grid_problem(kind, request.grid))
        if request.sampled:
            _put(errors, "ranges", "Only sweeps take ranges to sample.")
    _put(errors, "parallelism", parallelism_problem(kind, request.parallelism, replicas))
    _put(errors, "env", env_problem(kind, request.env, context.reserved_env))
    if "env" not in errors:
        _put(errors, "secrets", secrets_problem(request, context))
    _put(errors, "datasets", datasets_problem(request, context))
    if kind == core.KIND_INFERENCE:
        if request.replicas is not None:
            _put(
                errors,
                "replicas",
                "An endpoint's replicas are min_replicas and max_replicas; leave replicas out.",
            )
        for key, message in endpoint_problems(request, context).items():
            _put(errors, key, message)
    for key, message in command_problems(kind, request.command, request.args).items():
        _put(errors, key, message)
    for key, message in limit_problems(request).items():
        _put(errors, key, message)
    _put(errors, "priority_class", priority_problem(request, leads=context.leads))
    if not isinstance(request.requeue_on_preemption, bool):
        _put(errors, "requeue_on_preemption", REQUEUE_NOT_BOOLEAN)
    for key, message in catalog_problems(kind, context).items():
        _put(errors, key, message)
    for key, message in governance_problems(request, context, errors.keys()).items():
        _put(errors, key, message)
    shape_known = not ({"gpu_milli", "replicas"} & errors.keys()) and not (
        kind == core.KIND_SWEEP and {"grid", "ranges", "samples", "seed"} & errors.keys()
    )
    if shape_known and replicas is not None and "parallelism" not in errors:
        # A request no scheduling cycle could ever admit is refused now, not queued forever.
        # A sweep's trials are units of their own: what must fit is the trials run at once.
        at_once = parallelism_of(request) or replicas
        if kind == core.KIND_INFERENCE and "min_replicas" not in errors:
            at_once = max(1, endpoint_of(request).min_replicas)
        gang = kind == core.KIND_TRAINING and replicas > 1
        problems = capacity_problems(request.gpu_milli, at_once, context, gang=gang)
        if kind == core.KIND_INFERENCE and not problems:
            _put(errors, "min_replicas", guarantee_problem(request.gpu_milli, at_once, context))
        for key, message in problems.items():
            if (
                kind == core.KIND_SWEEP
                and key == "gpu_milli"
                and ("limit" in message or "per-user cap" in message)
            ):
                key, message = "parallelism", f"{message} ({at_once} trials at once)"
            _put(errors, key, message)
    return errors


def governance_problems(
    request: WorkloadRequest, context: Context, broken: Iterable[str] = ()
) -> dict[str, str]:
    """What the team's policy and its budget's hard stop refuse (DESIGN.md, "Governance"),
    each message naming the policy or the budget. ``broken``: fields already refused."""
    errors: dict[str, str] = {}
    if context.policy is not None:
        replicas = replicas_of(request)
        at_once = None
        if not ({"gpu_milli", "replicas", "parallelism"} & set(broken)) and replicas is not None:
            at_once = request.gpu_milli * (parallelism_of(request) or replicas)
        runtime = request.max_runtime_seconds
        errors.update(
            policy_core.policy_problems(
                context.policy,
                kind=request.kind,
                gpu_class=context.gpu_class.name,
                sharing_mode=context.gpu_class.sharing_mode,
                image=context.image.name,
                gpu_milli=request.gpu_milli if _whole_number(request.gpu_milli) else 0,
                at_once_milli=at_once,
                max_runtime_seconds=runtime if _whole_number(runtime) else None,
            )
        )
    if "priority_class" not in broken:
        _put(
            errors,
            "priority_class",
            budget_core.stop_problem(
                context.budget, priority_class=priority_of(request), leads=context.leads
            ),
        )
    return errors


def parallelism_of(request: WorkloadRequest) -> int | None:
    """Trials of a sweep that run at once: as asked, else the default, at most its trials."""
    if request.kind != core.KIND_SWEEP:
        return None
    points = replicas_of(request) or 0
    if request.parallelism is not None:
        return request.parallelism
    return max(1, min(DEFAULT_PARALLELISM, points)) if points else DEFAULT_PARALLELISM


MAX_SEED = 2**32 - 1
SAMPLES_INVALID = (
    f"Give the number of points to sample: a whole number from 1 to {MAX_GRID_POINTS}."
)
SEED_INVALID = f"The seed is a whole number from 0 to {MAX_SEED}."


def sampling_problems(request: WorkloadRequest) -> dict[str, str]:
    """Field → message for a sweep's ranges, samples and seed."""
    errors: dict[str, str] = {}
    samples, seed, ranges = request.samples, request.seed, request.ranges
    if samples is None:
        errors["samples"] = "Say how many points to sample from the ranges."
    elif not _whole_number(samples) or not 1 <= samples <= MAX_GRID_POINTS:
        errors["samples"] = SAMPLES_INVALID
    if seed is not None and (not _whole_number(seed) or not 0 <= seed <= MAX_SEED):
        errors["seed"] = SEED_INVALID
    _put(errors, "ranges", ranges_problem(ranges))
    return errors


def ranges_problem(ranges: Any) -> str | None:
    if not isinstance(ranges, Mapping) or not ranges:
        return "Give the ranges to sample: parameter → [low, high] or [low, high, scale]."
    for key, spec in ranges.items():
        names = grid_problem(core.KIND_SWEEP, {key: ["x"]}) if isinstance(key, str) else None
        if names or not isinstance(key, str):
            return names or "Parameter names are text."
        if isinstance(spec, str) or not isinstance(spec, Sequence) or len(spec) not in (2, 3):
            return f"Give {key} as [low, high] or [low, high, scale]."
        low, high = spec[0], spec[1]
        scale = spec[2] if len(spec) == 3 else core.SCALE_LINEAR
        numbers = all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in (low, high)
        )
        if not numbers:
            return f"The bounds of {key} must be numbers."
        if scale not in core.SCALES:
            return f"The scale of {key} is one of: {', '.join(core.SCALES)}."
        if not low < high:
            return f"The low bound of {key} must be below its high bound."
        if scale == core.SCALE_LOG and low <= 0:
            return f"A log range needs bounds above 0; {key} starts at {low}."
        if scale == core.SCALE_INT and math.floor(high) < math.ceil(low):
            return f"No whole number lies between the bounds of {key}."
    if len({k.upper() for k in ranges}) != len(ranges):
        return "Two parameters would have the same SWEEP_<NAME>; name them apart by more than case."
    return None


PARALLELISM_INVALID = "Give the number of trials that may run at once: a whole number, at least 1."


def parallelism_problem(kind: str, parallelism: Any, trials: int | None) -> str | None:
    if parallelism is None:
        return None
    if kind != core.KIND_SWEEP:
        return "Only sweeps take a parallelism cap."
    if not _whole_number(parallelism) or parallelism < 1:
        return PARALLELISM_INVALID
    if trials is not None and parallelism > trials:
        return (
            f"The sweep has {trials} trials; at most {trials} can run at once, not {parallelism}."
        )
    return None


REQUEUE_NOT_BOOLEAN = "Say true (back in the queue after a preemption) or false (end there)."


def charge_of(
    request: WorkloadRequest, gpu_class: GpuClassFacts, context: Context | None = None
) -> Charge:
    """What an accepted request (no problems) on ``gpu_class`` is recorded and charged as; with
    the context, its secret references resolved."""
    replicas = replicas_of(request)
    assert replicas is not None, "only for accepted requests"
    charged = charged_milli_of(request.gpu_milli, gpu_class)
    resolved = tuple(resolved_secrets(request.secrets, context)) if context else ()
    datasets = tuple(resolved_datasets(request.datasets, context)) if context else ()
    return Charge(
        request.gpu_milli,
        replicas,
        priority_of(request),
        charged,
        resolved,
        datasets,
        parallelism=parallelism_of(request),
        max_runtime_seconds=policy_core.runtime_default(
            context.policy if context else None, request.kind, request.max_runtime_seconds
        ),
        idle_timeout_seconds=policy_core.idle_timeout_default(
            context.policy if context else None, request.kind, request.idle_timeout_seconds
        ),
        endpoint=recorded_endpoint(request, context),
    )


def recorded_endpoint(request: WorkloadRequest, context: Context | None) -> dict[str, Any] | None:
    """An accepted endpoint's settings as the workload records them."""
    if request.kind != core.KIND_INFERENCE:
        return None
    e = endpoint_of(request)
    recorded = e.recorded()
    recorded["model_secret_k8s"] = ""
    recorded["model_secret_keys"] = []
    if e.model_secret and context is not None:
        secret = secret_of(SecretRef(name=e.model_secret), context)
        if secret is not None:
            recorded["model_secret_k8s"] = secret.k8s_name
            recorded["model_secret_keys"] = list(secret.keys)
    return recorded


def replicas_of(request: WorkloadRequest) -> int | None:
    """Replicas as recorded: a sweep's are the points of its grid (None: no grid to count)."""
    if request.kind == core.KIND_SWEEP:
        if request.sampled:
            samples = request.samples
            ok = _whole_number(samples) and 1 <= samples <= MAX_GRID_POINTS  # type: ignore[operator]
            return samples if ok else None
        points = grid_points(request.grid or {})
        return points or None
    return 1 if request.replicas is None else request.replicas


def priority_of(request: WorkloadRequest) -> str:
    return request.priority_class or core.DEFAULT_PRIORITY.get(request.kind, core.PRIORITY_BATCH)


def grid_points(grid: Mapping[str, Sequence[str]]) -> int:
    """Points of a grid (0 for an empty one)."""
    return math.prod(len(values) for values in grid.values()) if grid else 0


def _put(errors: dict[str, str], key: str, message: str | None) -> None:
    if message:
        errors.setdefault(key, message)


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- one rule per field ---------------------------------------------------------------------------


def name_problem(name: str) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return NAME_MISSING
    if len(name) > MAX_NAME_LENGTH:
        return f"The name has {len(name)} characters; at most {MAX_NAME_LENGTH}."
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return "The name may not contain control characters (tabs, line breaks)."
    hidden = next((c for c in name if unicodedata.category(c) in HIDDEN_CATEGORIES), None)
    if hidden is not None:
        return (
            "The name may not contain invisible formatting characters such as bidirectional "
            f"overrides or zero-width marks (found U+{ord(hidden):04X}): they make a name read "
            "differently from what it is."
        )
    return None


def amount_problems(kind: str, gpu_milli: Any, replicas: Any) -> dict[str, str]:
    """Field → message for an amount of GPU that cannot be requested, whatever the class.

    A request is ``replicas × gpu_milli``; fractions (< 1000) are single-replica only and
    multi-GPU replicas use whole GPUs (DESIGN.md) — except in a sweep, whose replicas are
    independent trials that may each use a fraction.
    """
    errors: dict[str, str] = {}
    if not _whole_number(gpu_milli):
        errors["gpu_milli"] = AMOUNT_NOT_WHOLE
    elif gpu_milli <= 0:
        errors["gpu_milli"] = "The GPU amount must be positive (1000 = one GPU)."
    elif gpu_milli > MAX_GPU_MILLI:
        errors["gpu_milli"] = f"At most {MAX_GPU_MILLI // MILLI} GPUs per replica."
    elif gpu_milli > MILLI and gpu_milli % MILLI:
        errors["gpu_milli"] = (
            f"More than one GPU per replica must be whole GPUs (2000, 3000, …), not {gpu_milli}."
        )
    if replicas is None:
        return errors  # a sweep without a grid: the grid's rule says so
    if not _whole_number(replicas):
        errors["replicas"] = REPLICAS_NOT_WHOLE
    elif replicas < 1:
        errors["replicas"] = "At least one replica is needed."
    elif kind == core.KIND_NOTEBOOK and replicas > 1:
        errors["replicas"] = "A notebook runs as one replica."
    elif kind == core.KIND_TRAINING and replicas > MAX_NODES:
        errors["replicas"] = f"A training job runs on at most {MAX_NODES} nodes (replicas)."
    elif (
        kind not in (core.KIND_SWEEP, core.KIND_INFERENCE)
        and replicas > 1
        and "gpu_milli" not in errors
        and gpu_milli < MILLI
    ):
        errors["replicas"] = "Fractions of a GPU are for a single replica only."
    return errors


def grid_problem(kind: str, grid: Mapping[str, Sequence[str]] | None) -> str | None:
    if kind != core.KIND_SWEEP:
        return "Only sweeps take a parameter grid." if grid else None
    if not grid:
        return GRID_MISSING
    seen: dict[str, str] = {}
    for key, values in grid.items():
        if not isinstance(key, str) or not ENV_NAME_RE.fullmatch(key):
            return (
                f"“{key}” cannot name a parameter: use ASCII letters, digits and _, not "
                "starting with a digit (each point sees it as SWEEP_<NAME>)."
            )
        other = seen.setdefault(key.upper(), key)
        if other != key:
            return (
                f"{other} and {key} would both be SWEEP_{key.upper()}; name parameters apart "
                "by more than case."
            )
        if isinstance(values, str) or not isinstance(values, Sequence) or not values:
            return f"Give {key} a list of at least one value."
        for value in values:
            if not isinstance(value, str):
                return f"The values of {key} must be text."
            if len(value) > MAX_GRID_VALUE_LENGTH:
                return (
                    f"A value of {key} has {len(value)} characters; at most "
                    f"{MAX_GRID_VALUE_LENGTH}."
                )
    points = grid_points(grid)
    if points > MAX_GRID_POINTS:
        return f"The grid has {points} points; at most {MAX_GRID_POINTS} per sweep."
    return None


def env_name_problem(
    name: str, *, kind: str = "", reserved: ReservedEnv = DEFAULT_RESERVED_ENV
) -> str | None:
    if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
        return (
            f"“{name}” is not an environment variable name: use ASCII letters, digits and _, "
            "not starting with a digit."
        )
    if reserved.covers(name):
        return (
            f"{name} is reserved: the GPU runtime, the loader or the platform set it "
            f"({reserved.shown()})."
        )
    if kind == core.KIND_SWEEP and name.startswith(SWEEP_ENV_PREFIX):
        return f"{name} is reserved in a sweep: each point sets SWEEP_INDEX and SWEEP_<NAME>."
    return None


def env_problem(
    kind: str, env: Mapping[str, str], reserved: ReservedEnv = DEFAULT_RESERVED_ENV
) -> str | None:
    if len(env) > MAX_ENV_VARS:
        return f"{len(env)} environment variables; at most {MAX_ENV_VARS}."
    size = 0
    for name, value in env.items():
        problem = env_name_problem(name, kind=kind, reserved=reserved)
        if problem:
            return problem
        if not isinstance(value, str):
            return f"The value of {name} must be text."
        size += len(name.encode()) + len(value.encode())
    if size > MAX_ENV_BYTES:
        return (
            f"The environment variables take {size} bytes; at most {MAX_ENV_BYTES} (names and "
            "values together). Put larger settings in a file on the team volume."
        )
    return None


def command_problems(kind: str, command: Sequence[str], args: Sequence[str]) -> dict[str, str]:
    errors: dict[str, str] = {}
    if kind == core.KIND_NOTEBOOK:
        if command:
            errors["command"] = "A notebook runs JupyterLab; it takes no command."
        if args:
            errors["args"] = "A notebook runs JupyterLab; it takes no arguments."
        return errors
    if kind in (core.KIND_TRAINING, core.KIND_SWEEP) and not command:
        errors["command"] = COMMAND_MISSING
    for key, words, what in (("command", command, "command"), ("args", args, "arguments")):
        if key in errors:
            continue
        if len(words) > MAX_WORDS:
            verb = "have" if what == "arguments" else "has"
            errors[key] = f"The {what} {verb} {len(words)} words; at most {MAX_WORDS}."
        elif any(not isinstance(w, str) for w in words):
            errors[key] = f"Each word of the {what} must be text."
        elif any(len(w) > MAX_WORD_LENGTH for w in words):
            errors[key] = f"A word of the {what} is longer than {MAX_WORD_LENGTH} characters."
        elif key == "command" and words and not words[0].strip():
            errors[key] = "The command must start with the program to run."
    return errors


def _in_range(value: Any, bounds: tuple[int, int]) -> bool:
    return _whole_number(value) and bounds[0] <= value <= bounds[1]


def limit_problems(request: WorkloadRequest) -> dict[str, str]:
    errors: dict[str, str] = {}
    if request.kind == core.KIND_INFERENCE:
        if request.max_runtime_seconds is not None:
            errors["max_runtime_seconds"] = (
                "An endpoint runs until it is stopped; no maximum runtime."
            )
        if request.idle_timeout_seconds is not None:
            errors["idle_timeout_seconds"] = (
                "An endpoint scales to zero after idle_minutes instead (with min_replicas 0)."
            )
    if request.max_runtime_seconds is not None and not _in_range(
        request.max_runtime_seconds, RUNTIME_SECONDS
    ):
        errors["max_runtime_seconds"] = RUNTIME_OUT_OF_RANGE
    if request.idle_timeout_seconds is not None and not _in_range(
        request.idle_timeout_seconds, IDLE_TIMEOUT_SECONDS
    ):
        errors["idle_timeout_seconds"] = IDLE_TIMEOUT_OUT_OF_RANGE
    if not _in_range(request.retries, RETRIES):
        errors["retries"] = RETRIES_OUT_OF_RANGE
    return errors


def priority_problem(request: WorkloadRequest, *, leads: bool) -> str | None:
    priority = priority_of(request)
    if priority not in core.PRIORITY_ORDER:
        return f"Unknown priority class “{priority}”; use one of: {', '.join(core.PRIORITY_ORDER)}."
    if request.kind not in SUBMITTABLE_KINDS:
        return None
    if request.kind == core.KIND_INFERENCE:
        if not leads:
            return ENDPOINT_PRIORITY_MEMBERS
        if priority != core.PRIORITY_PRODUCTION:
            return "An inference endpoint runs in the production class (never preempted)."
        return None
    allowed = core.allowed_priorities(request.kind, is_lead=leads, is_admin=False)
    if priority not in allowed:
        return (
            f"You may not use the {priority} class for a {KIND_LABELS[request.kind]}; choose "
            f"one of: {', '.join(allowed)}."
        )
    return None


def catalog_problems(kind: str, context: Context) -> dict[str, str]:
    errors: dict[str, str] = {}
    if not context.gpu_class.enabled:
        errors["gpu_class"] = f"{context.gpu_class.name} is not offered at the moment."
    image = context.image
    if not image.enabled:
        errors["image"] = f"The image {image.name} is no longer offered."
    elif kind == core.KIND_NOTEBOOK and image.kind == IMAGE_TRAINING:
        errors["image"] = f"{image.name} is a training image; pick a notebook image."
    elif kind in (core.KIND_TRAINING, core.KIND_SWEEP) and image.kind == IMAGE_NOTEBOOK:
        errors["image"] = f"{image.name} is a notebook image; pick a training image."
    elif kind == core.KIND_INFERENCE and image.kind != IMAGE_SERVING:
        errors["image"] = (
            f"{image.name} is not a serving image; pick one of the catalog's serving images "
            "(vLLM, Triton, TGI, …)."
        )
    elif kind != core.KIND_INFERENCE and image.kind == IMAGE_SERVING:
        errors["image"] = f"{image.name} is a serving image: it is for inference endpoints."
    return errors


# --- could any cycle ever admit it --------------------------------------------------------------


def mig_profile_for(gpu_class: GpuClassFacts, gpu_milli: int) -> str | None:
    """The smallest offered MIG profile whose memory covers the fraction's memory (the one
    mapping, in the catalog)."""
    return catalog_core.mig_profile_for(gpu_class, gpu_milli)


def sharing_problem(gpu_class: GpuClassFacts, gpu_milli: int, hint: str = "") -> str | None:
    """Why the class's sharing mode cannot serve ``gpu_milli`` per replica, if it cannot."""
    mode = gpu_class.sharing_mode
    if mode == catalog_core.SHARING_WHOLE:
        if gpu_milli % MILLI:
            whole = -(-gpu_milli // MILLI) * MILLI
            return (
                f"{gpu_class.name} gives whole GPUs only; ask for {format_milli(whole)} GPU or "
                f"pick a class that shares GPUs.{hint}"
            )
        return None
    if mode == catalog_core.SHARING_MIG:
        if gpu_milli > MILLI:
            return f"{gpu_class.name} is partitioned with MIG: ask for at most one GPU per replica."
        if mig_profile_for(gpu_class, gpu_milli) is None:
            profiles = catalog_core.sort_mig_profiles(list(gpu_class.mig_profiles or ()))
            return (
                f"No MIG profile of {gpu_class.name} holds {format_milli(gpu_milli)} GPU; the "
                f"largest offered is {profiles[-1] if profiles else 'none'}."
            )
        return None
    if mode in (catalog_core.SHARING_TIMESLICE, catalog_core.SHARING_HAMI):
        return None
    return f"Unknown sharing mode {mode!r} of {gpu_class.name}."


def capacity_problems(
    gpu_milli: int, replicas: int, context: Context, *, gang: bool = False
) -> dict[str, str]:
    """Field → message for each reason no scheduling cycle could ever admit the request: the
    class cannot express the amount, no node could hold one replica, a gang (one replica per
    node, in one cluster) has more replicas than any cluster has nodes for, or it exceeds the
    team's limit or the per-user cap. Without a node inventory the node checks are skipped."""
    errors: dict[str, str] = {}
    gpu_class = context.gpu_class
    hint = (
        f" Classes that share GPUs: {', '.join(sorted(context.sharing_classes))}."
        if context.sharing_classes
        else ""
    )
    problem = sharing_problem(gpu_class, gpu_milli, hint)
    if problem:
        return {"gpu_milli": problem}
    mine = [n for n in context.nodes if n.gpu_count > 0]
    if mine:
        gpus = math.ceil(gpu_milli / MILLI)
        most = max(n.gpu_count for n in mine)
        profile = (
            mig_profile_for(gpu_class, gpu_milli)
            if gpu_class.sharing_mode == catalog_core.SHARING_MIG
            else None
        )
        if gpus > most:
            errors["gpu_milli"] = (
                f"One replica needs {gpus} GPUs on one node, but the largest {gpu_class.name} "
                f"node has {most}. Use more replicas with at most {most} GPUs each."
            )
        elif profile and not any(profile in (n.mig_layout or ()) for n in mine):
            errors["gpu_milli"] = (
                f"No {gpu_class.name} GPU is partitioned with a {profile} instance."
            )
        elif gang:
            per_cluster: dict[Any, int] = {}
            for n in mine:
                if n.gpu_count >= gpus:
                    key = getattr(n, "cluster_id", None)
                    per_cluster[key] = per_cluster.get(key, 0) + 1
            room = max(per_cluster.values(), default=0)
            if replicas > room:
                errors["replicas"] = (
                    f"A job of {replicas} replicas runs one replica per node, all at once, in "
                    f"one cluster; at most {room} {gpu_class.name} nodes of one cluster can hold "
                    f"{gpus} GPU{'s' if gpus != 1 else ''} each. Ask for at most {room} "
                    "replicas, with more GPUs each."
                )
        if context.cpu_milli > max(n.cpu_milli for n in mine):
            errors["cpu_milli"] = (
                f"No {gpu_class.name} node has {context.cpu_milli / 1000:g} CPU cores to give "
                "one replica."
            )
        if context.memory_mib > max(n.memory_mib for n in mine):
            errors["memory_mib"] = (
                f"No {gpu_class.name} node has {context.memory_mib} MiB of memory to give one "
                "replica."
            )
    charged = charged_milli_of(gpu_milli, gpu_class)
    total = charged * replicas
    asks = (
        f"This asks for {format_milli(total)} GPU of {gpu_class.name}"
        if charged == gpu_milli
        else f"This is charged {format_milli(total)} GPU of {gpu_class.name} (what the "
        "cluster grants)"
    )
    quota = context.quota
    limit = quota.limit_milli if quota else 0
    if limit <= 0:
        errors["gpu_class"] = (
            f"{context.team} has no quota for {gpu_class.name}; "
            f"{no_quota_advice(admin=context.admin)}."
        )
    elif total > limit:
        _put(
            errors,
            "gpu_milli",
            f"{asks}, more than {context.team}'s limit of {format_milli(limit)} GPU.",
        )
    elif quota and quota.per_user_cap_milli is not None and total > quota.per_user_cap_milli:
        _put(
            errors,
            "gpu_milli",
            f"{asks}, more than the per-user cap of "
            f"{format_milli(quota.per_user_cap_milli)} GPU in {context.team}.",
        )
    return errors


def no_quota_advice(*, admin: bool) -> str:
    """Who gives a team quota for a class, as the person asking should read it."""
    if admin:
        return "give it one under Team quotas in the admin"
    return "ask a platform admin for one"


# --- secrets --------------------------------------------------------------------------------------


def secret_of(ref: SecretRef, context: Context) -> SecretFacts | None:
    """The secret a reference names, among those the asking person may use: their personal one
    first, then the team's (a recorded scope says which)."""
    mine = [
        s
        for s in context.secrets
        if s.name == ref.name and s.owner_id is not None and s.owner_id == context.actor_id
    ]
    team = [s for s in context.secrets if s.name == ref.name and s.owner_id is None]
    if ref.scope == "personal" or ref.owner is not None:
        candidates = mine
    elif ref.scope == "team":
        candidates = team
    else:
        candidates = [*mine, *team]
    return candidates[0] if candidates else None


def _secret_ref_problem(ref: SecretRef, context: Context) -> str | None:
    if not isinstance(ref.name, str) or not ref.name:
        return "Name the secret each reference uses."
    if not isinstance(ref.env, str) or not isinstance(ref.key, str):
        return f"The variable and key of {ref.name} must be text."
    if ref.scope and ref.scope not in SECRET_SCOPES:
        return f"Unknown scope “{ref.scope}” of {ref.name}; use team or personal."
    if ref.owner is not None and ref.owner != context.actor_id:
        return (
            f"{ref.name} is someone else's personal secret: only its owner may use it. Create "
            "your own secret and refer to it."
        )
    secret = secret_of(ref, context)
    if secret is None:
        return (
            f"No secret named “{ref.name}” in {context.team} that you may use; create it "
            "first (the Secrets page, or gpupaas secret create)."
        )
    if ref.env:
        if ref.key and ref.key not in secret.keys:
            return (
                f"The secret {ref.name} has no key “{ref.key}”; its keys: "
                f"{', '.join(secret.keys) or 'none'}."
            )
        if not ref.key and len(secret.keys) != 1:
            return (
                f"The secret {ref.name} has keys {', '.join(secret.keys)}; say which one "
                f"{ref.env} takes (NAME:ENV=KEY)."
            )
    elif ref.key:
        return f"Name the variable that takes {ref.name}'s key {ref.key} (NAME:ENV=KEY)."
    return None


def secret_env_names(ref: SecretRef, secret: SecretFacts) -> list[str]:
    """The variables a resolved reference sets."""
    return [ref.env] if ref.env else list(secret.keys)


def secrets_problem(request: WorkloadRequest, context: Context) -> str | None:
    refs = request.secrets
    if len(refs) > MAX_SECRET_REFS:
        return f"{len(refs)} secret references; at most {MAX_SECRET_REFS}."
    seen: dict[str, tuple[int, str]] = dict.fromkeys(request.env, (-1, "a plain variable"))
    for index, ref in enumerate(refs):
        problem = _secret_ref_problem(ref, context)
        if problem:
            return problem
        secret = secret_of(ref, context)
        assert secret is not None
        for name in secret_env_names(ref, secret):
            problem = env_name_problem(name, kind=request.kind, reserved=context.reserved_env)
            if problem:
                if not ref.env:
                    problem = (
                        f"The key {name} of {ref.name} cannot be a variable name; name the "
                        f"variable for it (NAME:ENV=KEY). {problem}"
                    )
                return problem
            other, what = seen.setdefault(name, (index, f"the secret {ref.name}"))
            if other != index:
                return f"{name} is set twice (by {what} and the secret {ref.name})."
    return None


def resolved_secrets(refs: Sequence[SecretRef], context: Context) -> list[dict[str, Any]]:
    """The references of an accepted request as the workload records them: the secret's
    scope, owner and stored Kubernetes name, and the key each variable takes."""
    result = []
    for ref in refs:
        secret = secret_of(ref, context)
        assert secret is not None, "only for accepted requests"
        key = ref.key or (secret.keys[0] if ref.env else "")
        result.append(
            {
                "name": secret.name,
                "env": ref.env,
                "key": key,
                "scope": "team" if secret.owner_id is None else "personal",
                "owner": secret.owner_id,
                "k8s_name": secret.k8s_name,
            }
        )
    return result


# --- datasets -------------------------------------------------------------------------------------


def dataset_of(name: str, context: Context) -> DatasetFacts | None:
    """The team's dataset of that name: only the team's are in the context."""
    return next((d for d in context.datasets if d.name == name), None)


def datasets_problem(request: WorkloadRequest, context: Context) -> str | None:
    names = request.datasets
    if isinstance(names, str | bytes) or not isinstance(names, Sequence):
        return 'List the datasets by name (e.g. ["imagenet"]).'
    if len(names) > MAX_DATASET_REFS:
        return f"{len(names)} datasets; at most {MAX_DATASET_REFS}."
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name:
            return "Name each dataset the request uses."
        if name in seen:
            return f"The dataset {name} is named twice."
        seen.add(name)
        if dataset_of(name, context) is None:
            known = ", ".join(sorted(d.name for d in context.datasets)) or "none yet"
            return (
                f"No dataset named “{name[:100]}” in {context.team}; a request may use only its "
                f"team's datasets (registered by its leads: {known})."
            )
    return None


def resolved_datasets(names: Sequence[str], context: Context) -> list[dict[str, Any]]:
    """The datasets of an accepted request as the workload records them: where the data is,
    and the stored name and keys of the secret an object-store dataset names."""
    result = []
    for name in names:
        d = dataset_of(name, context)
        assert d is not None, "only for accepted requests"
        result.append(
            {
                "name": d.name,
                "kind": d.kind,
                "claim": d.claim,
                "uri": d.uri,
                "secret": d.secret_k8s_name,
                "secret_keys": list(d.secret_keys),
            }
        )
    return result


# --- inference endpoints --------------------------------------------------------------------------


def endpoint_of(request: WorkloadRequest) -> EndpointRequest:
    return request.endpoint if request.endpoint is not None else EndpointRequest()


def scale_target_of(endpoint: EndpointRequest) -> Any:
    """The scaling target as asked, else the metric's default."""
    if endpoint.scale_target is not None:
        return endpoint.scale_target
    return DEFAULT_SCALE_TARGETS.get(endpoint.scale_metric, DEFAULT_SCALE_TARGETS[SCALE_RPS])


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def model_path_problem(path: Any, datasets: Sequence[str], context: Context) -> str | None:
    """A model path must lie on the team's volume (/team/…) or on a claim dataset the request
    names (/datasets/<name>/…); nothing else of the pod's filesystem, and no way out of them."""
    if not isinstance(path, str) or not path.strip():
        return "Give the model's path (on /team or a dataset) or its object-store URI."
    if len(path) > MAX_MODEL_REF_LENGTH or any(ord(c) < 32 or ord(c) == 127 for c in path):
        return f"The model path must be one line of at most {MAX_MODEL_REF_LENGTH} characters."
    parts = path.split("/")
    if not path.startswith("/") or any(p in (".", "..") for p in parts):
        return "The model path must be absolute (/team/… or /datasets/<name>/…) without . or .."
    if parts[1] == TEAM_VOLUME_MOUNT.strip("/") and len(parts) > 2 and parts[2]:
        return None
    if parts[1] == DATASETS_MOUNT.strip("/") and len(parts) > 2 and parts[2]:
        name = parts[2]
        dataset = dataset_of(name, context)
        if dataset is None or name not in datasets:
            return (
                f"/datasets/{name[:100]} is not a dataset this endpoint mounts: name the team's "
                "dataset in datasets first."
            )
        if not dataset.claim:
            return (
                f"The dataset {name} is in an object store, not on a volume: give its URI as "
                "the model URI instead."
            )
        return None
    return (
        "The model must be on the team's volumes: a path under /team/ or /datasets/<name>/ "
        f"of a dataset of {context.team}, not {path[:100]}."
    )


def model_uri_problem(uri: Any) -> str | None:
    if not isinstance(uri, str) or len(uri) > MAX_MODEL_REF_LENGTH:
        return f"The model URI is text of at most {MAX_MODEL_REF_LENGTH} characters."
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() not in MODEL_URI_SCHEMES or not rest.strip("/"):
        return (
            f"“{uri[:100]}” is not a model URI: use "
            f"{', '.join(s + '://' for s in MODEL_URI_SCHEMES)} followed by the bucket or "
            "repository."
        )
    if any(ord(c) <= 32 or ord(c) == 127 for c in uri):
        return "The model URI may not contain spaces or control characters."
    return None


def endpoint_problems(request: WorkloadRequest, context: Context) -> dict[str, str]:
    """Field → message for an endpoint's own fields."""
    errors: dict[str, str] = {}
    e = endpoint_of(request)
    low, high = ENDPOINT_PORTS
    if not _whole_number(e.port) or not low <= e.port <= high:
        errors["port"] = f"The port is a whole number from {low} to {high}."
    path = e.health_path
    if (
        not isinstance(path, str)
        or len(path) > MAX_HEALTH_PATH_LENGTH
        or not HEALTH_PATH_RE.fullmatch(path)
    ):
        errors["health_path"] = (
            "The health path starts with / and has letters, digits and / _ . ~ % - only "
            f"(at most {MAX_HEALTH_PATH_LENGTH} characters), e.g. /health."
        )
    if not _whole_number(e.min_replicas) or not 0 <= e.min_replicas <= MAX_ENDPOINT_REPLICAS:
        errors["min_replicas"] = f"The minimum is a whole number from 0 to {MAX_ENDPOINT_REPLICAS}."
    if not _whole_number(e.max_replicas) or not 1 <= e.max_replicas <= MAX_ENDPOINT_REPLICAS:
        errors["max_replicas"] = f"The maximum is a whole number from 1 to {MAX_ENDPOINT_REPLICAS}."
    if not errors.keys() & {"min_replicas", "max_replicas"} and e.min_replicas > e.max_replicas:
        errors["min_replicas"] = (
            f"The minimum ({e.min_replicas}) is above the maximum ({e.max_replicas}) replicas."
        )
    has_path = bool(e.model_path)
    has_uri = bool(e.model_uri)
    if has_path and has_uri:
        errors["model_uri"] = "Give the model's path or its URI, not both."
    elif has_uri:
        _put(errors, "model_uri", model_uri_problem(e.model_uri))
    else:
        names = request.datasets if isinstance(request.datasets, Sequence) else ()
        _put(errors, "model_path", model_path_problem(e.model_path, list(names), context))
    if e.model_secret:
        if not has_uri:
            errors["model_secret"] = "A model secret is for an object-store URI's keys."  # noqa: S105
        else:
            _put(
                errors,
                "model_secret",
                _secret_ref_problem(SecretRef(name=e.model_secret), context),
            )
    metric = e.scale_metric
    if metric not in SCALE_METRICS:
        errors["scale_metric"] = (
            f"Scale on {SCALE_RPS} (requests per second per replica) or {SCALE_GPU} (GPU "
            "utilisation in percent)."
        )
    else:
        target = scale_target_of(e)
        bounds = SCALE_TARGET_BOUNDS[metric]
        if not _number(target) or not bounds[0] <= target <= bounds[1]:
            unit = "requests per second per replica" if metric == SCALE_RPS else "percent"
            errors["scale_target"] = (
                f"The scaling target is a number from {bounds[0]:g} to {bounds[1]:g} ({unit})."
            )
    idle = e.idle_minutes
    if idle is not None and (
        not _whole_number(idle) or not IDLE_MINUTES[0] <= idle <= IDLE_MINUTES[1]
    ):
        errors["idle_minutes"] = (
            f"Scale to zero after {IDLE_MINUTES[0]} to {IDLE_MINUTES[1]} minutes without requests."
        )
    elif "min_replicas" not in errors:
        if idle is not None and e.min_replicas != 0:
            errors["idle_minutes"] = "Scaling to zero when idle needs min_replicas 0."
        elif idle is None and e.min_replicas == 0:
            errors["min_replicas"] = (
                "min_replicas 0 scales to zero when idle: say after how many idle_minutes."
            )
    return errors


def guarantee_problem(gpu_milli: int, replicas: int, context: Context) -> str | None:
    """Endpoints run only on the team's guaranteed quota (never borrowed): its minimum
    replicas must fit the guarantee."""
    quota = context.quota
    guaranteed = getattr(quota, "guaranteed_milli", None)
    if guaranteed is None:
        return None
    total = charged_milli_of(gpu_milli, context.gpu_class) * replicas
    if total > guaranteed:
        return (
            f"Endpoints run only on guaranteed quota: {replicas} replica(s) are charged "
            f"{format_milli(total)} GPU of {context.gpu_class.name}, above {context.team}'s "
            f"guarantee of {format_milli(guaranteed)} GPU."
        )
    return None
