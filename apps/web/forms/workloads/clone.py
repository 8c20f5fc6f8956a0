"""A recorded request as the initial values of its kind's form (resubmit, "clone and edit")."""

from __future__ import annotations

import shlex
from decimal import Decimal
from typing import Any

from apps.web.forms.workloads.kinds import EndpointRequestForm
from apps.workloads import core, rules
from apps.workloads.models import Workload


def _hours(seconds: int) -> Decimal:
    """Seconds as the form's hours: exact where two decimals hold them, else rounded."""
    hours = Decimal(seconds) / 3600
    cents = hours.quantize(Decimal("0.01"))
    return hours if hours == cents else cents


def clone_initial(workload: Workload) -> dict[str, Any]:
    """A recorded request as the initial values of its kind's form: what the user typed, as
    near as the form can show it, under the name "… (copy)"."""
    hours = workload.max_runtime_seconds
    minutes = workload.idle_timeout_seconds
    grid = (workload.params or {}).get("grid") or {}
    secrets = []
    for ref in workload.secrets or []:
        line = str(ref.get("name", ""))
        if ref.get("env"):
            line += f":{ref['env']}" + (f"={ref['key']}" if ref.get("key") else "")
        secrets.append(line)
    values: dict[str, Any] = {
        "name": f"{workload.name} (copy)"[: rules.MAX_NAME_LENGTH],
        "team": workload.team_id,
        "gpu_class": workload.gpu_class_id,
        "gpu_milli": workload.gpu_milli,
        "priority_class": workload.priority_class,
        "image": workload.image_id,
        "max_runtime_hours": None if hours is None else _hours(hours),
        "idle_timeout_minutes": None if minutes is None else minutes // 60,
        "requeue_on_preemption": "yes" if workload.requeue_on_preemption else "no",
        "env": "\n".join(f"{k}={v}" for k, v in (workload.env or {}).items()),
        "secrets": "\n".join(secrets),
        "datasets": " ".join(
            str(d["name"]) for d in workload.datasets or [] if isinstance(d, dict) and d.get("name")
        ),
        "command": shlex.join(workload.command or []),
        "args": shlex.join(workload.args or []),
        "replicas": workload.replicas,
        "retries": workload.retries,
        "grid": "\n".join(f"{k}={','.join(map(str, v))}" for k, v in grid.items()),
    }
    params = workload.params or {}
    if workload.kind == core.KIND_SWEEP:
        ranges = params.get("ranges") or {}
        values["parallelism"] = params.get("parallelism")
        values["samples"] = params.get("samples")
        values["seed"] = params.get("seed")
        values["ranges"] = "\n".join(
            f"{k}={v[0]}..{v[1]}" + (f" {v[2]}" if len(v) > 2 and v[2] != "linear" else "")
            for k, v in ranges.items()
            if isinstance(v, list | tuple) and len(v) >= 2
        )
        if ranges:
            values["grid"] = ""
    topology = params.get("topology")
    if workload.kind == core.KIND_TRAINING and isinstance(topology, dict) and topology.get("level"):
        values["topology"] = str(topology["level"]) + (
            ":required" if topology.get("required") else ""
        )
    endpoint = params.get("endpoint")
    if workload.kind == core.KIND_INFERENCE and isinstance(endpoint, dict):
        values.pop("replicas", None)
        for key in EndpointRequestForm.ENDPOINT_FIELDS:
            if endpoint.get(key) not in (None, ""):
                values[key] = endpoint[key]
    return {k: v for k, v in values.items() if v is not None}
