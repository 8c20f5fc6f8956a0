"""An inference endpoint's own rules: port, health path, replicas, model source, scaling and
the guarantee it must fit. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from apps.quotas.core import format_milli
from apps.workloads.request import (
    SCALE_GPU,
    SCALE_METRICS,
    SCALE_RPS,
    EndpointRequest,
    SecretRef,
    WorkloadRequest,
    scale_target_of,
)
from apps.workloads.request import whole_number as _whole_number
from apps.workloads.rules.facts import Context, charged_milli_of, put_problem
from apps.workloads.rules.limits import (
    DATASETS_MOUNT,
    ENDPOINT_PORTS,
    HEALTH_PATH_RE,
    IDLE_MINUTES,
    MAX_ENDPOINT_REPLICAS,
    MAX_HEALTH_PATH_LENGTH,
    MAX_MODEL_REF_LENGTH,
    MODEL_URI_SCHEMES,
    SCALE_TARGET_BOUNDS,
    TEAM_VOLUME_MOUNT,
)
from apps.workloads.rules.references import dataset_of, secret_ref_problem


def endpoint_of(request: WorkloadRequest) -> EndpointRequest:
    return request.endpoint if request.endpoint is not None else EndpointRequest()


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
    _serving_problems(e, errors)
    _model_problems(e, request, context, errors)
    _scaling_problems(e, errors)
    return errors


def _serving_problems(e: EndpointRequest, errors: dict[str, str]) -> None:
    """The port, the health path and the replicas."""
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


def _model_problems(
    e: EndpointRequest, request: WorkloadRequest, context: Context, errors: dict[str, str]
) -> None:
    """Where the model comes from: a path on the team's volumes or a URI, and its secret."""
    has_path = bool(e.model_path)
    has_uri = bool(e.model_uri)
    if has_path and has_uri:
        errors["model_uri"] = "Give the model's path or its URI, not both."
    elif has_uri:
        put_problem(errors, "model_uri", model_uri_problem(e.model_uri))
    else:
        names = request.datasets if isinstance(request.datasets, Sequence) else ()
        put_problem(errors, "model_path", model_path_problem(e.model_path, list(names), context))
    if e.model_secret:
        if not has_uri:
            errors["model_secret"] = "A model secret is for an object-store URI's keys."  # noqa: S105
        else:
            put_problem(
                errors,
                "model_secret",
                secret_ref_problem(SecretRef(name=e.model_secret), context),
            )


def _scaling_problems(e: EndpointRequest, errors: dict[str, str]) -> None:
    """The scaling metric and target, and scaling to zero when idle."""
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
