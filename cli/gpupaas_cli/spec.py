"""Workload specs: a YAML file and/or command-line flags → one request, the API's body.

A spec file looks like::

    kind: training          # notebook | training | sweep
    name: resnet50
    team: vision            # optional when you are in one team
    gpu_class: H100-80GB
    image: PyTorch training
    gpu: 2                  # GPUs per replica (0.5 = half a GPU); or gpu_milli: 2000
    replicas: 2
    topology: {level: rack, required: true}   # training: replicas in one rack (or prefer)
    command: [torchrun, train.py]
    args: [--epochs, "90"]
    env: {WANDB_MODE: offline}
    secrets:                # team or personal secrets by name; values never in the spec
      - {name: hf, env: HF_TOKEN, key: token}
      - {name: wandb}       # every key of the secret becomes a variable
    datasets: [imagenet]    # the team's datasets, mounted read-only at /datasets/<name>
    max_runtime_seconds: 86400
    grid: {lr: [0.1, 0.01]} # sweeps only: one trial per point
    parallelism: 4          # sweeps only: trials at once
    # instead of a grid: samples drawn from ranges ([low, high, linear|log|int]), seeded
    # ranges: {lr: [1.0e-5, 1.0e-3, log], bs: [16, 64, int]}
    # samples: 20
    # seed: 7
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

KINDS = {
    "notebook": "notebook",
    "job": "training",
    "training": "training",
    "sweep": "sweep",
    "endpoint": "inference",
    "inference": "inference",
}
# An endpoint's own settings (the ``endpoint`` mapping of a spec, or flags).
ENDPOINT_FIELDS = {
    "port",
    "health_path",
    "min_replicas",
    "max_replicas",
    "model_path",
    "model_uri",
    "model_secret",
    "scale_metric",
    "scale_target",
    "idle_minutes",
}
FIELDS = {
    "kind",
    "name",
    "team",
    "gpu_class",
    "image",
    "gpu",
    "gpu_milli",
    "replicas",
    "priority_class",
    "command",
    "args",
    "env",
    "secrets",
    "datasets",
    "max_runtime_seconds",
    "idle_timeout_seconds",
    "retries",
    "requeue",
    "grid",
    "parallelism",
    "ranges",
    "samples",
    "seed",
    "endpoint",
    "topology",
}
# Written as given (a number where the API wants one, or not): the server's rules check these,
# with the same message for the portal, the API and the CLI.
Unchecked = Any


class SpecError(ValueError):
    """The spec cannot become a request; the message says which part and why."""


@dataclass(frozen=True)
class WorkloadRequest:
    """The body of ``POST /api/v1/workloads/`` (and ``…/validate/``), field for field as the
    API reads it: one value, built once from a spec file and flags and sent whole.

    ``None`` means "not given": the field is left out of the body and the server's default
    applies. The CLI settles the shape of what it can (the kind's name, GPUs as milli-GPU, lists
    of words, text values, secret references); numbers and names go as written and the server
    checks them."""

    kind: str
    name: str
    gpu_class: str
    image: str
    gpu_milli: int
    team: Unchecked = None
    replicas: Unchecked = None
    priority_class: Unchecked = None
    command: list[str] | None = None
    args: list[str] | None = None
    env: dict[str, str] | None = None
    secrets: list[dict[str, str]] | None = None
    datasets: list[str] | None = None
    max_runtime_seconds: Unchecked = None
    idle_timeout_seconds: Unchecked = None
    retries: Unchecked = None
    requeue_on_preemption: bool | None = None
    grid: dict[str, list[str]] | None = None
    parallelism: Unchecked = None
    ranges: Unchecked = None
    samples: Unchecked = None
    seed: Unchecked = None
    endpoint: dict[str, Unchecked] | None = None
    # Multi-node training: its replicas in one domain of a topology level.
    topology: dict[str, Unchecked] | None = None
    # Submit even though starting it preempts running work of yours or your teammates.
    confirm_preemption: bool | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body: every field that was given."""
        values = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: value for name, value in values if value is not None}

    def confirmed(self) -> WorkloadRequest:
        """The same request, confirming the preemption its start may cause."""
        return replace(self, confirm_preemption=True)


def gpus_to_milli(value: Any) -> int:
    try:
        amount = float(value)
    except (TypeError, ValueError):
        raise SpecError(f"gpu must be a number of GPUs such as 0.5 or 2, not {value!r}.") from None
    if amount <= 0:
        raise SpecError("gpu must be more than 0.")
    return round(amount * 1000)


_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str, what: str) -> int:
    """``90`` (seconds), ``30m``, ``48h``, ``2d`` → seconds."""
    value = text.strip().lower()
    number = value.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = value[len(number) :] or "s"
    if not number.isdigit() or unit not in _UNITS:
        raise SpecError(f"{what}: write a duration such as 90, 30m, 48h or 2d, not {text!r}.")
    return int(number) * _UNITS[unit]


def load_file(path: Path) -> dict[str, Any]:
    import yaml  # here, not at the top: most commands read no spec file

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"Cannot read {path}: {exc.strerror or exc}.") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(data, Mapping):
        raise SpecError(f"{path} must hold a mapping of fields (kind, name, gpu, …).")
    unknown = sorted(set(map(str, data)) - FIELDS)
    if unknown:
        raise SpecError(f"{path}: unknown field(s) {', '.join(unknown)}.")
    return {str(k): v for k, v in data.items()}


def parse_pairs(items: list[str], what: str) -> dict[str, str]:
    """["A=1", "B=x"] → {"A": "1", "B": "x"}."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"{what} must look like NAME=VALUE, not {item!r}.")
        result[key] = value
    return result


def parse_secret_ref(item: str) -> dict[str, str]:
    """``NAME[:ENV[=KEY]]`` → a reference: ``hf:HF_TOKEN=token`` sets HF_TOKEN to the key
    token of the secret hf; ``hf:HF_TOKEN`` to its only key; ``wandb`` every key of it."""
    name, _, rest = item.partition(":")
    env, _, key = rest.partition("=")
    if not name.strip():
        raise SpecError(f"--secret must look like NAME[:ENV[=KEY]], not {item!r}.")
    ref = {"name": name.strip()}
    if env.strip():
        ref["env"] = env.strip()
    if key.strip():
        ref["key"] = key.strip()
    return ref


def parse_secret_data(literals: list[str], files: list[str]) -> dict[str, str]:
    """``--from-literal key=value`` and ``--from-file key=path`` → the secret's data."""
    data = parse_pairs(literals, "--from-literal")
    for key, path in parse_pairs(files, "--from-file").items():
        if key in data:
            raise SpecError(f"The key {key} is given twice.")
        try:
            data[key] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"Cannot read {path} for {key}: {exc}.") from exc
    if not data:
        raise SpecError("Give the value: --from-literal KEY=VALUE or --from-file KEY=PATH.")
    return data


def parse_topology(text: str) -> dict[str, Any]:
    """``rack`` (prefer one rack) or ``rack:required`` (wait for one) → the API's ask."""
    level, _, how = text.strip().partition(":")
    if not level or how not in ("", "required", "preferred"):
        raise SpecError(
            f"--topology must look like LEVEL or LEVEL:required (e.g. rack:required), not {text!r}."
        )
    return {"level": level, "required": how == "required"}


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """["lr=0.1,0.01", "bs=32"] → {"lr": ["0.1", "0.01"], "bs": ["32"]}."""
    return {
        k: [v.strip() for v in vs.split(",") if v.strip()]
        for k, vs in parse_pairs(items, "--grid").items()
    }


def build_request(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a spec file with flags (flags win) into the body of POST /api/v1/workloads/."""
    return request_of(base, overrides).body()


def request_of(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> WorkloadRequest:
    """Merge a spec file with flags (flags win) into the request to submit."""
    merged: dict[str, Any] = dict(base)
    for key, value in overrides.items():
        if value is None or value == [] or value == {}:
            continue
        merged[key] = value
    if "gpu" in merged:
        if "gpu_milli" in overrides and overrides["gpu_milli"] is not None:
            merged.pop("gpu")
        else:
            merged["gpu_milli"] = gpus_to_milli(merged.pop("gpu"))
    kind = str(merged.get("kind") or "")
    if kind not in KINDS:
        raise SpecError(
            "Say what to run: kind is notebook, job (training), sweep or endpoint (inference)."
        )
    merged["kind"] = KINDS[kind]
    missing = [f for f in ("name", "gpu_class", "image", "gpu_milli") if not merged.get(f)]
    if missing:
        names = ", ".join("gpu (or gpu_milli)" if m == "gpu_milli" else m for m in missing)
        raise SpecError(f"Missing: {names}.")
    for key in ("command", "args"):
        if key in merged:
            value = merged[key]
            if isinstance(value, str):
                merged[key] = value.split()
            elif isinstance(value, list):
                merged[key] = [str(v) for v in value]
            else:
                raise SpecError(f"{key} must be a list of strings.")
    if "env" in merged:
        if not isinstance(merged["env"], Mapping):
            raise SpecError("env must be a mapping of NAME: value.")
        merged["env"] = {str(k): str(v) for k, v in merged["env"].items()}
    if "requeue" in merged:
        requeue = merged.pop("requeue")
        if not isinstance(requeue, bool):
            raise SpecError(
                "requeue must be true (back in the queue after a preemption) or false (end there)."
            )
        merged["requeue_on_preemption"] = requeue
    if "secrets" in merged:
        refs = merged["secrets"]
        if not isinstance(refs, list) or not all(
            isinstance(r, Mapping) and r.get("name") for r in refs
        ):
            raise SpecError("secrets must be a list of {name, env, key} (env and key optional).")
        merged["secrets"] = [{str(k): str(v) for k, v in r.items()} for r in refs]
    if "endpoint" in merged:
        endpoint = merged["endpoint"]
        if not isinstance(endpoint, Mapping):
            raise SpecError("endpoint must be a mapping: port, health_path, min_replicas, …")
        unknown = sorted(set(map(str, endpoint)) - ENDPOINT_FIELDS)
        if unknown:
            raise SpecError(
                f"Unknown endpoint field(s): {', '.join(unknown)}; known: "
                f"{', '.join(sorted(ENDPOINT_FIELDS))}."
            )
        merged["endpoint"] = dict(endpoint)
    if "datasets" in merged:
        names = merged["datasets"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise SpecError("datasets must be a list of dataset names, e.g. [imagenet].")
    if "topology" in merged:
        topology = merged["topology"]
        if isinstance(topology, str):
            merged["topology"] = parse_topology(topology)
        elif not isinstance(topology, Mapping) or not set(map(str, topology)) <= {
            "level",
            "required",
        }:
            raise SpecError("topology must be {level: rack, required: true} or a level's name.")
        else:
            merged["topology"] = dict(topology)
    if "grid" in merged:
        grid = merged["grid"]
        if not isinstance(grid, Mapping) or not all(isinstance(v, list) for v in grid.values()):
            raise SpecError("grid must map each parameter to a list of values.")
        merged["grid"] = {str(k): [str(x) for x in v] for k, v in grid.items()}
    unknown = sorted(set(merged) - _REQUEST_FIELDS)
    if unknown:
        raise SpecError(f"Unknown field(s): {', '.join(unknown)}.")
    return WorkloadRequest(**merged)


_REQUEST_FIELDS = {f.name for f in fields(WorkloadRequest)}


def spec_of(workload: Mapping[str, Any], *, name: str | None = None) -> dict[str, Any]:
    """A workload as the API shows it (GET /api/v1/workloads/ID/) → a spec that submits the
    same request, named ``name`` (default: "… (copy)"). Secrets stay references by name."""
    kind = str(workload.get("kind") or "")
    result: dict[str, Any] = {
        "kind": kind,
        "name": name or f"{workload.get('name', '')} (copy)"[:100],
        "team": workload.get("team"),
        "gpu_class": workload.get("gpu_class"),
        "image": workload.get("image"),
        "gpu_milli": workload.get("gpu_milli"),
    }
    if kind == "training":
        result["replicas"] = workload.get("replicas")
        if workload.get("topology"):
            result["topology"] = workload.get("topology")
    optional = {
        "priority_class": workload.get("priority_class"),
        "command": workload.get("command"),
        "args": workload.get("args"),
        "env": workload.get("env"),
        "secrets": [
            {k: str(ref[k]) for k in ("name", "env", "key") if ref.get(k)}
            for ref in workload.get("secrets") or []
            if isinstance(ref, Mapping) and ref.get("name")
        ],
        "datasets": [
            str(d["name"])
            for d in workload.get("datasets") or []
            if isinstance(d, Mapping) and d.get("name")
        ],
        "max_runtime_seconds": workload.get("max_runtime_seconds"),
        "idle_timeout_seconds": workload.get("idle_timeout_seconds"),
        "retries": workload.get("retries") or None,
        "grid": (workload.get("params") or {}).get("grid") if kind == "sweep" else None,
    }
    result.update({k: v for k, v in optional.items() if v not in (None, [], {})})
    if workload.get("requeue_on_preemption") is False:
        result["requeue"] = False
    return result


def dump(spec: Mapping[str, Any]) -> str:
    """A spec as YAML, fields in the order of the module's example."""
    import yaml

    return yaml.safe_dump(dict(spec), sort_keys=False, allow_unicode=True, default_flow_style=None)
