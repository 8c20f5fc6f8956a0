"""The rule set: every rule a request breaks, field by field (``request_problems``), and what an
accepted request is recorded and charged as (``charge_of``). Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from apps.budgets import core as budget_core
from apps.policies import core as policy_core
from apps.workloads import core
from apps.workloads.request import (
    SecretRef,
    WorkloadRequest,
)
from apps.workloads.request import whole_number as _whole_number
from apps.workloads.rules.capacity import capacity_problems
from apps.workloads.rules.endpoints import endpoint_of, endpoint_problems, guarantee_problem
from apps.workloads.rules.facts import (
    Charge,
    Context,
    GpuClassFacts,
    charged_milli_of,
    grid_points,
    priority_of,
    put_problem,
)
from apps.workloads.rules.fields import (
    amount_problems,
    catalog_problems,
    command_problems,
    env_problem,
    grid_problem,
    limit_problems,
    name_problem,
    placeholder_problems,
    priority_problem,
)
from apps.workloads.rules.limits import DEFAULT_PARALLELISM, MAX_GRID_POINTS, SUBMITTABLE_KINDS
from apps.workloads.rules.references import (
    datasets_problem,
    resolved_datasets,
    resolved_secrets,
    secret_of,
    secrets_problem,
)


def request_problems(request: WorkloadRequest, context: Context) -> dict[str, str]:
    """Field → message for every rule the request breaks (one message per field: the first
    rule to speak of a field has its say, so the order below is the order of precedence)."""
    errors: dict[str, str] = {}
    replicas = replicas_of(request)
    _shape_problems(request, replicas, errors)
    _content_problems(request, context, errors)
    _put_all(errors, governance_problems(request, context, errors.keys()))
    _fit_problems(request, replicas, context, errors)
    return errors


def _put_all(errors: dict[str, str], problems: Mapping[str, str]) -> None:
    for key, message in problems.items():
        put_problem(errors, key, message)


def _shape_problems(request: WorkloadRequest, replicas: int | None, errors: dict[str, str]) -> None:
    """The kind, the name, the amount and replicas, a sweep's grid or sampling, parallelism."""
    kind = request.kind
    if kind not in SUBMITTABLE_KINDS:
        errors["kind"] = (
            f"“{kind}” is not a kind of workload you can request; use one of: "
            f"{', '.join(SUBMITTABLE_KINDS)}."
        )
    put_problem(errors, "name", name_problem(request.name))
    _put_all(errors, amount_problems(kind, request.gpu_milli, replicas))
    if (
        kind == core.KIND_SWEEP
        and replicas is not None
        and request.replicas is not None
        and request.replicas != replicas
    ):
        put_problem(
            errors,
            "replicas",
            f"A sweep runs one replica per point of its grid ({replicas} here); leave "
            "replicas out.",
        )
    if kind == core.KIND_SWEEP and request.sampled:
        if request.grid:
            put_problem(errors, "grid", "Give either a grid or ranges to sample, not both.")
        _put_all(errors, sampling_problems(request))
    else:
        put_problem(errors, "grid", grid_problem(kind, request.grid))
        if request.sampled:
            put_problem(errors, "ranges", "Only sweeps take ranges to sample.")
    put_problem(errors, "parallelism", parallelism_problem(kind, request.parallelism, replicas))


def _content_problems(request: WorkloadRequest, context: Context, errors: dict[str, str]) -> None:
    """What the request holds and asks for: environment, secrets, datasets, an endpoint's
    settings, command, placeholders, limits, priority, requeue, the catalog's class and image."""
    kind = request.kind
    put_problem(errors, "env", env_problem(kind, request.env, context.reserved_env))
    if "env" not in errors:
        put_problem(errors, "secrets", secrets_problem(request, context))
    put_problem(errors, "datasets", datasets_problem(request, context))
    if kind == core.KIND_INFERENCE:
        if request.replicas is not None:
            put_problem(
                errors,
                "replicas",
                "An endpoint's replicas are min_replicas and max_replicas; leave replicas out.",
            )
        _put_all(errors, endpoint_problems(request, context))
    _put_all(errors, command_problems(kind, request.command, request.args))
    _put_all(errors, placeholder_problems(request))
    _put_all(errors, limit_problems(request))
    put_problem(errors, "priority_class", priority_problem(request, leads=context.leads))
    if not isinstance(request.requeue_on_preemption, bool):
        put_problem(errors, "requeue_on_preemption", REQUEUE_NOT_BOOLEAN)
    put_problem(errors, "topology", topology_problem(request, context))
    _put_all(errors, catalog_problems(kind, context))


def topology_problem(request: WorkloadRequest, context: Context) -> str | None:
    """A topology ask names a configured level, says whether it is required, and is made by a
    multi-node training job (a single replica is on one node anyway)."""
    ask = request.topology
    if ask is None:
        return None
    levels = list(context.topology_levels)
    if not isinstance(ask, Mapping) or set(ask) - {"level", "required"}:
        return 'A topology ask is {"level": "<level>", "required": true or false}.'
    if request.kind != core.KIND_TRAINING or (request.replicas or 1) < 2:
        return "Only a multi-node training job (2 or more replicas) can ask for a topology."
    if not levels:
        return "This platform has no topology levels configured (SCHEDULING_TOPOLOGY_LEVELS)."
    if ask.get("level") not in levels:
        return f"Unknown topology level {ask.get('level')!r}: one of {', '.join(levels)}."
    if not isinstance(ask.get("required", False), bool):
        return "A topology ask's required is true (wait for one domain) or false (prefer one)."
    return None


def _fit_problems(
    request: WorkloadRequest, replicas: int | None, context: Context, errors: dict[str, str]
) -> None:
    """A request no scheduling cycle could ever admit is refused now, not queued forever (once
    its shape is known). A sweep's trials are units of their own: what must fit is the trials
    run at once."""
    kind = request.kind
    shape_known = not ({"gpu_milli", "replicas"} & errors.keys()) and not (
        kind == core.KIND_SWEEP and {"grid", "ranges", "samples", "seed"} & errors.keys()
    )
    if not shape_known or replicas is None or "parallelism" in errors:
        return
    at_once = parallelism_of(request) or replicas
    if kind == core.KIND_INFERENCE and "min_replicas" not in errors:
        at_once = max(1, endpoint_of(request).min_replicas)
    gang = kind == core.KIND_TRAINING and replicas > 1
    problems = capacity_problems(request.gpu_milli, at_once, context, gang=gang)
    if kind == core.KIND_INFERENCE and not problems:
        put_problem(errors, "min_replicas", guarantee_problem(request.gpu_milli, at_once, context))
    for key, message in problems.items():
        if (
            kind == core.KIND_SWEEP
            and key == "gpu_milli"
            and ("limit" in message or "per-user cap" in message)
        ):
            key, message = "parallelism", f"{message} ({at_once} trials at once)"
        put_problem(errors, key, message)


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
        put_problem(
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
    put_problem(errors, "ranges", ranges_problem(ranges))
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
