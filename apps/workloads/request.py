"""A workload request as one value: what every door builds and ``workload_submit`` takes whole.

The portal form, the API serializer and a resubmission of a recorded workload (a clone) each
build a :class:`WorkloadRequest` with :meth:`WorkloadRequest.of`; the request rules
(:mod:`apps.workloads.rules`) check it, the dry runs and the submission alike. Values are kept
as the door parsed them, unchecked: what they may be is the rules' to say. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.workloads import core

DEFAULT_ENDPOINT_PORT = 8000
DEFAULT_HEALTH_PATH = "/health"
SCALE_RPS = "rps"  # requests per second per replica
SCALE_GPU = "gpu"  # GPU utilisation in percent
SCALE_METRICS = (SCALE_RPS, SCALE_GPU)
DEFAULT_SCALE_TARGETS = {SCALE_RPS: 10.0, SCALE_GPU: 70.0}

# A sweep's settings and an endpoint's, as a recorded workload keeps them in its ``params``.
SWEEP_PARAMS = ("grid", "parallelism", "ranges", "samples", "seed")
ENDPOINT_PARAM = "endpoint"


def whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
            owner=owner if whole_number(owner) else None,
        )


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


def scale_target_of(endpoint: EndpointRequest) -> Any:
    """The scaling target as asked, else the metric's default."""
    if endpoint.scale_target is not None:
        return endpoint.scale_target
    return DEFAULT_SCALE_TARGETS.get(endpoint.scale_metric, DEFAULT_SCALE_TARGETS[SCALE_RPS])


TOPOLOGY_PARAM = "topology"


@dataclass(frozen=True)
class WorkloadRequest:
    """A request as a door parsed it. Values are checked by the rules, not trusted: a door
    passes on whatever it could parse (an int that is negative, a name with a newline, …)."""

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
    # Multi-node training: its replicas in one topology domain, ``{"level": "rack",
    # "required": false}`` (a level of SCHEDULING_TOPOLOGY_LEVELS; required: wait until one
    # domain holds them all, else prefer one). None: anywhere.
    topology: Mapping[str, Any] | None = None
    # What the workload records besides the settings above, kept as given (a clone's other
    # recorded settings, pod annotations for the simulated cluster); the rules do not read it.
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def sampled(self) -> bool:
        return self.ranges is not None or self.samples is not None

    @classmethod
    def of(cls, **values: Any) -> WorkloadRequest:
        """From a door's values (lists, dicts, ``None`` for what was left out) or a recorded
        workload's fields (a clone: a sweep's and an endpoint's settings are read from its
        ``params``, its datasets from their resolved entries). Unknown names are a TypeError."""
        params = dict(values.pop("params", None) or {})
        kind = values.get("kind", "")
        if kind == core.KIND_SWEEP:
            values = _sweep_values(values, params)
        recorded = params.pop(ENDPOINT_PARAM, None) if kind == core.KIND_INFERENCE else None
        endpoint = values.pop("endpoint", None)
        endpoint = recorded if endpoint is None else endpoint
        topology = params.pop(TOPOLOGY_PARAM, None)  # a clone's recorded ask
        if values.get("topology") is None and topology is not None:
            values["topology"] = topology
        given = {k: v for k, v in values.items() if v is not None}
        return cls(
            **{
                **given,
                "command": tuple(values.get("command") or ()),
                "args": tuple(values.get("args") or ()),
                "env": dict(values.get("env") or {}),
                "secrets": tuple(_secret_ref(ref) for ref in values.get("secrets") or ()),
                "datasets": dataset_names(values.get("datasets")),
                "endpoint": _endpoint_of(kind, endpoint),
                "params": params,
            }
        )


def _sweep_values(values: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A sweep's settings as given, else as its recorded ``params`` hold them (a clone); the
    sampling settings come from one place, all of them or none."""
    recorded = {k: params.pop(k) for k in SWEEP_PARAMS if k in params}
    values = dict(values)
    for name in ("grid", "parallelism"):
        if values.get(name) is None:
            values[name] = recorded.get(name)
    if values.get("ranges") is None and values.get("samples") is None:
        values["ranges"], values["samples"] = recorded.get("ranges"), recorded.get("samples")
        if values.get("seed") is None:
            values["seed"] = recorded.get("seed")
    return values


def _secret_ref(value: Any) -> SecretRef:
    return value if isinstance(value, SecretRef) else SecretRef.of(value)


def _endpoint_of(kind: str, value: Any) -> EndpointRequest | None:
    """An endpoint's settings (defaults where none were given); other kinds have none."""
    if kind != core.KIND_INFERENCE:
        return None
    if isinstance(value, EndpointRequest):
        return value
    return EndpointRequest.of(value if isinstance(value, Mapping) else {})


def dataset_names(datasets: Any) -> Any:
    """Names as a door passed them, or the names of a recorded workload's resolved entries
    (a clone); anything else goes to the rules as it is, to be refused there."""
    if not isinstance(datasets, list | tuple):
        return datasets if datasets else ()
    return tuple(d.get("name", "") if isinstance(d, dict) else d for d in datasets)
