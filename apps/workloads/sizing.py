"""How much GPU to ask for: the amounts a class offers and a memory-based sizing helper. Pure.

The sizing rule of thumb (shown to the user as it is computed)::

    GPU memory ≈ parameters × bytes per parameter (precision) × task factor

Task factors: inference 1.2 (weights plus about 20% for KV cache and activations); LoRA
fine-tune 1.5 (frozen weights plus adapters, their optimizer state and activations); full
fine-tune 4.8 (weights, gradients and two Adam moments, plus about 20% for activations).
It is an estimate for picking a first size, not a guarantee: long contexts and large
batches need more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from apps.catalog import core as catalog_core
from apps.catalog.resources import GpuClassSpec, ResourceMappingError, charged_milli, gpu_resources

PRECISION_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "int4": 0.5}
PRECISION_LABELS: dict[str, str] = {
    "fp32": "fp32 (4 bytes)",
    "bf16": "bf16 / fp16 (2 bytes)",
    "fp8": "fp8 / int8 (1 byte)",
    "int4": "int4 (½ byte)",
}

TASK_INFERENCE = "inference"
TASK_LORA = "lora"
TASK_FULL = "full"
TASK_FACTORS: dict[str, tuple[float, str]] = {
    TASK_INFERENCE: (1.2, "inference: weights + ~20% KV cache and activations"),
    TASK_LORA: (1.5, "LoRA fine-tune: frozen weights + adapters, optimizer and activations"),
    TASK_FULL: (4.8, "full fine-tune: weights, gradients, 2 Adam moments + ~20% activations"),
}
TASK_LABELS: dict[str, str] = {
    TASK_INFERENCE: "Inference",
    TASK_LORA: "LoRA fine-tune",
    TASK_FULL: "Full fine-tune",
}
# Whole-GPU amounts offered per replica (a node has at most 8 GPUs in every supported class).
WHOLE_GPU_COUNTS = (1, 2, 4, 8)
MIB_PER_GIB = 1024


class SizingError(ValueError):
    """Inputs the helper cannot size (unknown precision or task, non-positive size)."""


def fraction_choices(gpu: GpuClassSpec) -> list[int]:
    """The fractions (milli-GPU below 1000) a class offers, smallest first; none for ``whole``.

    MIG: one amount per offered profile (the largest fraction that still maps to it);
    time-slicing: one amount per slice (k/R of a GPU); HAMi: k/S of a GPU for S virtual GPUs
    per physical GPU (quarters when S is unknown).
    """
    mode = gpu.sharing_mode
    amounts: set[int] = set()
    if mode == catalog_core.SHARING_MIG:
        for profile in gpu.mig_profiles:
            memory = catalog_core.mig_profile_memory_mib(profile) or 0
            milli = min(1000, memory * 1000 // gpu.memory_mib) if gpu.memory_mib else 0
            if 0 < milli < 1000:
                amounts.add(milli)
    elif mode == catalog_core.SHARING_TIMESLICE:
        slices = gpu.timeslice_replicas or 1
        amounts.update(k * 1000 // slices for k in range(1, slices))
    elif mode == catalog_core.SHARING_HAMI:
        split = gpu.hami_split_count if gpu.hami_split_count and gpu.hami_split_count > 1 else 4
        amounts.update(k * 1000 // split for k in range(1, split))
    return sorted(a for a in amounts if 0 < a < 1000)


def amount_choices(gpu: GpuClassSpec, *, max_whole: int = 8) -> list[int]:
    """Every per-replica amount offered for a class: its fractions, then whole GPUs."""
    whole = [n * 1000 for n in WHOLE_GPU_COUNTS if n <= max_whole]
    if gpu.sharing_mode == catalog_core.SHARING_MIG:
        whole = [1000] if _maps(1000, gpu) else []
    return [*fraction_choices(gpu), *whole]


def _maps(milli: int, gpu: GpuClassSpec) -> bool:
    try:
        gpu_resources(milli, gpu)
    except ResourceMappingError:
        return False
    return True


def describe_amount(milli: int, gpu: GpuClassSpec) -> str:
    """What ``milli`` of the class becomes, in words ("0.25 × A100-80GB → MIG 2g.20gb")."""
    try:
        return gpu_resources(milli, gpu).description
    except ResourceMappingError as exc:
        return str(exc)


def amount_label(milli: int) -> str:
    if milli < 1000:
        return f"{milli / 1000:g} GPU"
    count = milli // 1000
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def usable_memory_mib(milli: int, gpu: GpuClassSpec) -> int:
    """GPU memory one replica gets with ``milli`` of the class (MIG: its profile's memory)."""
    if gpu.sharing_mode == catalog_core.SHARING_MIG and milli <= 1000:
        try:
            profile = gpu_resources(milli, gpu).limits
        except ResourceMappingError:
            return 0
        name = next(iter(profile)).removeprefix("nvidia.com/mig-")
        return catalog_core.mig_profile_memory_mib(name) or 0
    return gpu.memory_mib * milli // 1000


@dataclass(frozen=True)
class SizingClass:
    """A GPU class as the helper sees it: an id to link back to, a price and its spec."""

    id: int
    hourly_cost: float
    spec: GpuClassSpec


@dataclass(frozen=True)
class SizingOption:
    gpu_class_id: int
    gpu_class: str
    gpu_milli: int
    memory_mib: int
    hourly_cost: float
    description: str
    memory_isolated: bool

    @property
    def amount(self) -> str:
        return amount_label(self.gpu_milli)

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / MIB_PER_GIB


@dataclass(frozen=True)
class SizingEstimate:
    params_billions: float
    precision: str
    task: str
    memory_mib: int
    formula: str
    options: tuple[SizingOption, ...]
    notes: tuple[str, ...]

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / MIB_PER_GIB

    @property
    def suggestion(self) -> SizingOption | None:
        return self.options[0] if self.options else None


def estimate_memory_mib(params_billions: float, precision: str, task: str) -> int:
    if precision not in PRECISION_BYTES:
        raise SizingError(
            f"Unknown precision {precision!r}; use one of {', '.join(PRECISION_BYTES)}."
        )
    if task not in TASK_FACTORS:
        raise SizingError(f"Unknown task {task!r}; use one of {', '.join(TASK_FACTORS)}.")
    if not params_billions > 0:
        raise SizingError("The model size must be positive.")
    total_bytes = params_billions * 1e9 * PRECISION_BYTES[precision] * TASK_FACTORS[task][0]
    return math.ceil(total_bytes / (1024 * 1024))


def _smallest_fit(needed_mib: int, sc: SizingClass) -> SizingOption | None:
    gpu = sc.spec
    for milli in amount_choices(gpu):
        memory = usable_memory_mib(milli, gpu)
        if memory < needed_mib or not _maps(milli, gpu):
            continue
        resources = gpu_resources(milli, gpu)
        return SizingOption(
            gpu_class_id=sc.id,
            gpu_class=gpu.name,
            gpu_milli=milli,
            memory_mib=memory,
            hourly_cost=round(sc.hourly_cost * charged_milli(milli, gpu) / 1000, 4),  # as billed
            description=resources.description,
            memory_isolated=resources.memory_isolated,
        )
    return None


def size_request(
    *, params_billions: float, precision: str, task: str, classes: Iterable[SizingClass]
) -> SizingEstimate:
    """Estimated GPU memory and, per class, the smallest offered amount that holds it.

    Options are ordered cheapest first (then smallest, then memory-isolated before
    time-sliced); the first one is the suggestion.
    """
    needed = estimate_memory_mib(params_billions, precision, task)
    factor, why = TASK_FACTORS[task]
    formula = (
        f"{params_billions:g} B parameters × {PRECISION_BYTES[precision]:g} bytes ({precision}) "
        f"× {factor:g} ({why}) ≈ {needed / MIB_PER_GIB:.1f} GiB"
    )
    options = [o for sc in classes if (o := _smallest_fit(needed, sc)) is not None]
    options.sort(key=lambda o: (o.hourly_cost, o.gpu_milli, not o.memory_isolated, o.gpu_class))
    notes: list[str] = []
    if not options:
        notes.append(
            "No single replica of any class holds this model: use a training job with several "
            "nodes, a lower precision, or LoRA instead of a full fine-tune."
        )
    if any(not o.memory_isolated for o in options):
        notes.append(
            "Time-sliced GPUs share their memory with other workloads: the memory shown is not "
            "reserved for you."
        )
    return SizingEstimate(
        params_billions=params_billions,
        precision=precision,
        task=task,
        memory_mib=needed,
        formula=formula,
        options=tuple(options),
        notes=tuple(notes),
    )


def request_label(gpu_milli: int, replicas: int, gpu_class: str) -> str:
    """How much a request asks for: "0.25 GPU A100-80GB-MIG", "2 × 4 GPUs H100-80GB"."""
    prefix = f"{replicas} × " if replicas > 1 else ""
    return f"{prefix}{amount_label(gpu_milli)} {gpu_class}"
