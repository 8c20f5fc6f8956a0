"""How much GPU to ask for: the amounts a class offers and a memory-based sizing helper. Pure.

The memory a model needs comes from :mod:`apps.workloads.memory`, part by part (weights, KV
cache, adapters, gradients, optimizer states, activations), and is shown to the user as it is
computed. The helper then suggests, per class, the smallest offered amount that holds it. It
is an estimate for picking a first size, not a guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from apps.catalog import core as catalog_core
from apps.catalog.resources import GpuClassSpec, ResourceMappingError, charged_milli, gpu_resources
from apps.workloads import memory

PRECISION_BYTES: dict[str, float] = memory.BYTES
PRECISION_LABELS: dict[str, str] = {
    "fp32": "fp32 (4 bytes)",
    "bf16": "bf16 / fp16 (2 bytes)",
    "fp8": "fp8 / int8 (1 byte)",
    "int4": "int4 (½ byte)",
}

TASK_INFERENCE = memory.INFERENCE
TASK_LORA = memory.LORA
TASK_QLORA = memory.QLORA
TASK_FULL = memory.FULL
TASK_LABELS: dict[str, str] = {
    TASK_INFERENCE: "Inference",
    TASK_LORA: "LoRA fine-tune",
    TASK_QLORA: "QLoRA fine-tune (4-bit base)",
    TASK_FULL: "Full fine-tune (AdamW, mixed precision)",
}
PART_LABELS = {
    "weights": "weights",
    "kv_cache": "KV cache",
    "adapters": "adapters",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "activations": "activations",
    "reserve": "runtime reserve",
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


@dataclass(frozen=True)
class ModelFacts:
    """What the person knows of the model and how it is used; unknown counts are derived."""

    params_billions: float
    precision: str = "bf16"
    task: str = TASK_INFERENCE
    context: int = 4096
    batch: int = 1
    layers: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    lora_rank: int = 16
    checkpointing: bool = True

    def breakdown(self) -> memory.Breakdown:
        try:
            shape = memory.shape_of(
                self.params_billions, layers=self.layers, heads=self.heads, kv_heads=self.kv_heads
            )
            return memory.estimate(
                shape,
                memory.Usage(
                    task=self.task,
                    precision=self.precision,
                    context=self.context,
                    batch=self.batch,
                    lora_rank=self.lora_rank,
                    checkpointing=self.checkpointing,
                ),
            )
        except memory.EstimateError as exc:
            raise SizingError(str(exc)) from exc


def estimate_memory_mib(params_billions: float, precision: str, task: str, **known: Any) -> int:
    """GPU memory in MiB for the model used so (``known``: the other :class:`ModelFacts`)."""
    facts = ModelFacts(params_billions, precision, task, **known)
    return math.ceil(facts.breakdown().total_bytes / (1024 * 1024))


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
    *,
    params_billions: float,
    precision: str,
    task: str,
    classes: Iterable[SizingClass],
    **known: Any,
) -> SizingEstimate:
    """Estimated GPU memory and, per class, the smallest offered amount that holds it.

    Options are ordered cheapest first (then smallest, then memory-isolated before
    time-sliced); the first one is the suggestion.
    """
    facts = ModelFacts(params_billions, precision, task, **known)
    found = facts.breakdown()
    needed = math.ceil(found.total_bytes / (1024 * 1024))
    terms = " + ".join(
        f"{PART_LABELS.get(p.name, p.name)} {p.bytes / 1024**3:.1f} GiB ({p.how})"
        for p in found.parts
    )
    formula = f"{terms} ≈ {needed / MIB_PER_GIB:.1f} GiB"
    options = [o for sc in classes if (o := _smallest_fit(needed, sc)) is not None]
    options.sort(key=lambda o: (o.hourly_cost, o.gpu_milli, not o.memory_isolated, o.gpu_class))
    notes: list[str] = []
    shape = found.shape
    if not shape.stated:
        notes.append(
            f"Layers and heads not given: assumed {shape.layers} layers, hidden size "
            f"{shape.hidden} and {shape.heads} heads (a decoder of this size); give them for a "
            "closer KV cache and activation estimate."
        )
    if not options:
        notes.append(
            "No single replica of any class holds this: use a training job with several nodes, "
            "a lower precision, QLoRA, or a shorter context or smaller batch."
        )
    elif options[0].gpu_milli > 1000:
        notes.append(
            f"{options[0].amount} hold it only together: shard the model across them (FSDP or "
            "DeepSpeed ZeRO-3 for training, tensor parallelism for inference)."
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


def request_label(
    gpu_milli: int, replicas: int, gpu_class: str, *, parallelism: int | None = None
) -> str:
    """How much a request asks for: "0.25 GPU A100-80GB-MIG", "2 × 4 GPUs H100-80GB".

    A sweep (``parallelism`` given, ``replicas`` its trials) holds GPUs for the trials that
    run at once, each charged on its own: "5 trials at once × 0.25 GPU L40S-48GB (20 trials)"."""
    if parallelism is not None:
        at_once = max(1, min(parallelism, replicas))
        trials = "trial" if at_once == 1 else "trials"
        return (
            f"{at_once} {trials} at once × {amount_label(gpu_milli)} {gpu_class} "
            f"({replicas} {'trial' if replicas == 1 else 'trials'})"
        )
    prefix = f"{replicas} × " if replicas > 1 else ""
    return f"{prefix}{amount_label(gpu_milli)} {gpu_class}"


def sweep_parallelism(kind: str, params: Any) -> int | None:
    """A sweep's recorded parallelism (the rules fixed it at submit; malformed: 1); None for
    any other kind and for a trial (one replica of its own, which records none)."""
    if kind != "sweep" or not isinstance(params, dict) or params.get("parallelism") is None:
        return None
    value = params["parallelism"]
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return 1


def at_once_milli(milli: int, replicas: int, parallelism: int | None) -> int:
    """What a request holds at once of ``milli`` per replica: all its replicas, a sweep only
    the trials that run at once."""
    if parallelism is not None:
        return milli * max(1, min(parallelism, replicas))
    return milli * replicas
