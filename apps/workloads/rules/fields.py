"""One rule per field of a request: name, amount, grid, environment, command, placeholders,
limits, priority, catalog and image. Pure."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from apps.catalog import core as catalog_core
from apps.workloads import core
from apps.workloads.request import (
    WorkloadRequest,
)
from apps.workloads.request import whole_number as _whole_number
from apps.workloads.rules.facts import Context, grid_points, priority_of, put_problem
from apps.workloads.rules.limits import (
    AMOUNT_NOT_WHOLE,
    COMMAND_MISSING,
    DEFAULT_RESERVED_ENV,
    ENDPOINT_PRIORITY_MEMBERS,
    ENV_NAME_RE,
    GRID_MISSING,
    HIDDEN_CATEGORIES,
    IDLE_TIMEOUT_OUT_OF_RANGE,
    IDLE_TIMEOUT_SECONDS,
    IMAGE_NOTEBOOK,
    IMAGE_SERVING,
    IMAGE_TRAINING,
    KIND_LABELS,
    MAX_ENV_BYTES,
    MAX_ENV_VARS,
    MAX_GPU_MILLI,
    MAX_GRID_POINTS,
    MAX_GRID_VALUE_LENGTH,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_WORD_LENGTH,
    MAX_WORDS,
    MILLI,
    NAME_MISSING,
    REPLICAS_NOT_WHOLE,
    RETRIES,
    RETRIES_OUT_OF_RANGE,
    RUNTIME_OUT_OF_RANGE,
    RUNTIME_SECONDS,
    SUBMITTABLE_KINDS,
    SWEEP_ENV_PREFIX,
    ReservedEnv,
)


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


def sweep_parameters(request: WorkloadRequest) -> list[str] | None:
    """The names of a sweep's parameters (its grid's or its ranges'); None when it has none
    that could be read (the grid's and the ranges' own rules say what is wrong)."""
    source = request.ranges if request.sampled else request.grid
    if not isinstance(source, Mapping) or not source:
        return None
    return sorted(str(k) for k in source)


def placeholder_problems(request: WorkloadRequest) -> dict[str, str]:
    """A sweep's ``{name}`` placeholders in its command and arguments: each must name one of
    its parameters (each trial gets its value there), and a brace that is no placeholder is
    written twice (``{{``, ``}}``). Other kinds take braces as they are."""
    if request.kind != core.KIND_SWEEP:
        return {}
    names = sweep_parameters(request)
    errors: dict[str, str] = {}
    for key, words, what in (
        ("command", request.command, "command"),
        ("args", request.args, "arguments"),
    ):
        for word in words:
            if not isinstance(word, str):
                continue
            try:
                used = core.placeholders_in(word)
            except core.PlaceholderError as exc:
                errors[key] = f"In the {what}: {exc}"
                break
            unknown = [n for n in used if names is not None and n not in names]
            if unknown:
                errors[key] = _unknown_placeholder(unknown[0], names or [], what)
                break
    return errors


def _unknown_placeholder(name: str, names: Sequence[str], what: str) -> str:
    alike = [n for n in names if n.lower() == name.lower()]
    hint = f" Did you mean {{{alike[0]}}}?" if alike else ""
    return (
        f"{{{name}}} in the {what} is not a parameter of this sweep; its parameters are "
        f"{', '.join(names)}.{hint} Write {{{{ and }}}} for literal braces."
    )


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
    elif context.dra_unpublished:
        errors["gpu_class"] = (
            f"{context.gpu_class.name} allocates GPUs through Dynamic Resource Allocation, but "
            "none of its nodes publishes devices (ResourceSlices of NVIDIA's DRA driver, "
            "gpu.nvidia.com), so nothing of it can start. Ask a platform admin to check the "
            "driver on its nodes, or pick another class."
        )
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
    else:
        put_problem(
            errors,
            "image",
            image_availability_problem(image.name, context.image_clusters, context.images_there),
        )
    return errors


def image_suits(kind: str, image_kind: str) -> bool:
    """Whether an image of ``image_kind`` may run a workload of ``kind`` (as catalog_problems
    judges it)."""
    if kind == core.KIND_INFERENCE:
        return image_kind == IMAGE_SERVING
    if kind == core.KIND_NOTEBOOK:
        return image_kind not in (IMAGE_TRAINING, IMAGE_SERVING)
    return image_kind not in (IMAGE_NOTEBOOK, IMAGE_SERVING)


def image_availability_problem(
    image: str,
    clusters: Sequence[catalog_core.ImageOnCluster],
    there: Mapping[str, Sequence[str]],
) -> str | None:
    """Refused only when every cluster with nodes of the class reports its images and none of
    them holds this one; a cluster whose nodes report none (or no inventory) is unknown, never
    a refusal."""
    if not clusters or any(c.status != catalog_core.IMAGE_MISSING for c in clusters):
        return None
    names = [c.cluster for c in clusters]
    where = f"cluster {names[0]}" if len(names) == 1 else f"clusters {', '.join(names)}"
    offered = sorted({n for c in names for n in there.get(c, ())} - {image})
    return (
        f"The image {image} is not available on {where}; available: "
        f"{', '.join(offered) if offered else 'none of the catalog images for this kind'}."
    )
