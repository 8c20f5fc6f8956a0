"""How much GPU memory a model needs, part by part, for inference, LoRA/QLoRA and full
fine-tuning. Pure: plain numbers in, a breakdown out.

Inference
    weights (parameters × bytes of the chosen precision) + KV cache
    (2 × layers × KV heads × head size × context × batch × bytes per cache element; the cache
    is kept in 16 bits unless the precision is fp8, fp32 keeps it in 32) + a runtime reserve.

LoRA / QLoRA
    frozen base weights (LoRA: the chosen precision; QLoRA: 4-bit NormalFloat with double
    quantisation, 4.127 bits per parameter) + adapters of rank r on every linear layer of each
    block (r × (in + out) per matrix) with 12 bytes per adapter parameter (16-bit weights and
    gradients, two 32-bit Adam moments) + activations + the reserve.

Full fine-tuning (mixed precision with AdamW)
    16-bit weights (2 bytes) + a 32-bit master copy (4) + 16-bit gradients (2) + two 32-bit
    Adam moments (8) = 16 bytes per parameter (the 12-byte variant without a master copy, and
    8-bit Adam with 2 bytes of moments, are options) + activations + the reserve.

Activations of training (16-bit, per layer, sequence s, batch b, hidden h, heads a):
s·b·h·(34 + 5·a·s/h) bytes without checkpointing; with activation checkpointing each layer
keeps only its 2·s·b·h-byte input and one layer at a time is recomputed in full. The logits
add s·b·vocab·4 bytes.

A model's layer and head counts are used when known; otherwise a stated default shape is
derived from the parameter count (a decoder with 12·layers·hidden² parameters and hidden =
128·layers, heads of 128, no grouped-query attention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

BYTES = {"fp32": 4.0, "bf16": 2.0, "fp8": 1.0, "int4": 0.5}
NF4_DOUBLE_QUANT_BYTES = 4.127 / 8  # QLoRA: 4-bit weights + 0.127 bits of constants
ADAPTER_BYTES = 12.0  # 16-bit weight and gradient, two 32-bit Adam moments
MASTER_BYTES = 4.0
ADAM_BYTES = {"adamw": 8.0, "adamw-8bit": 2.0}
RESERVE_BYTES = 1 * 1024**3  # CUDA context, kernels' workspace, allocator slack
HEAD_DIM = 128
DEFAULT_VOCAB = 32_000

INFERENCE = "inference"
LORA = "lora"
QLORA = "qlora"
FULL = "full"
TASKS = (INFERENCE, LORA, QLORA, FULL)


class EstimateError(ValueError):
    """Inputs the estimate cannot use (unknown precision or task, a non-positive size)."""


@dataclass(frozen=True)
class ModelShape:
    """What the estimate reads of a model. ``stated`` says the layer and head counts were
    given, not derived from the parameter count."""

    params: float  # parameters
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int = DEFAULT_VOCAB
    stated: bool = True

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def default_shape(params_billions: float) -> ModelShape:
    """The stated default shape for a model known only by its size (see the module doc)."""
    params = params_billions * 1e9
    layers = max(1, round((params / (12 * HEAD_DIM**2)) ** (1 / 3)))
    hidden = HEAD_DIM * layers
    heads = max(1, hidden // HEAD_DIM)
    return ModelShape(
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=heads,
        intermediate=hidden * 8 // 3,
        stated=False,
    )


def shape_of(
    params_billions: float,
    *,
    layers: int | None = None,
    hidden: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    vocab: int | None = None,
) -> ModelShape:
    """The model's shape from what is known, the rest from :func:`default_shape`."""
    if not params_billions > 0:
        raise EstimateError("The model size must be positive.")
    base = default_shape(params_billions)
    if layers is not None and hidden is None:
        # Keep 12·L·h² ≈ parameters for the layers given.
        hidden = max(HEAD_DIM, round(math.sqrt(base.params / (12 * layers)) / 64) * 64)
    hidden = hidden or base.hidden
    heads = heads or max(1, hidden // HEAD_DIM)
    if hidden % heads:
        raise EstimateError(f"The hidden size {hidden} is not a multiple of {heads} heads.")
    kv = kv_heads or heads
    if kv > heads or heads % kv:
        raise EstimateError(f"{kv} KV heads must divide the {heads} attention heads.")
    for name, value in (("layers", layers), ("heads", heads), ("vocab", vocab)):
        if value is not None and value < 1:
            raise EstimateError(f"The {name} must be at least 1.")
    return replace(
        base,
        layers=layers or base.layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv,
        intermediate=intermediate or hidden * 8 // 3,
        vocab=vocab or DEFAULT_VOCAB,
        stated=layers is not None or hidden is not None or heads is not None,
    )


@dataclass(frozen=True)
class Usage:
    """What the model is used for and how."""

    task: str = INFERENCE
    precision: str = "bf16"  # weights (inference, LoRA base, full fine-tune compute)
    context: int = 4096  # tokens per sequence (inference: prompt and output)
    batch: int = 1  # sequences at once
    lora_rank: int = 16
    checkpointing: bool = True  # activation checkpointing (training)
    master_weights: bool = True  # full fine-tune: a 32-bit master copy of the weights
    optimizer: str = "adamw"


@dataclass(frozen=True)
class Part:
    name: str
    bytes: float
    how: str


@dataclass(frozen=True)
class Breakdown:
    shape: ModelShape
    usage: Usage
    parts: tuple[Part, ...]

    @property
    def total_bytes(self) -> float:
        return sum(p.bytes for p in self.parts)

    def part(self, name: str) -> float:
        return sum(p.bytes for p in self.parts if p.name == name)

    @property
    def model_state_bytes(self) -> float:
        """Weights, gradients and optimizer states (what ZeRO calls model states)."""
        return sum(p.bytes for p in self.parts if p.name in ("weights", "gradients", "optimizer"))


def kv_cache_bytes(shape: ModelShape, *, context: int, batch: int, element_bytes: float) -> float:
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * context * batch * element_bytes


def adapter_params(shape: ModelShape, rank: int) -> float:
    """LoRA adapters of rank ``rank`` on the attention (q, k, v, o) and MLP (gate, up, down)
    matrices of every layer: r × (inputs + outputs) each."""
    h, kv = shape.hidden, shape.kv_heads * shape.head_dim
    attention = (h + h) + (h + kv) * 2 + (h + h)
    mlp = 3 * (h + shape.intermediate)
    return float(rank * (attention + mlp) * shape.layers)


def activation_bytes(shape: ModelShape, *, context: int, batch: int, checkpointing: bool) -> float:
    s, b, h, a = context, batch, shape.hidden, shape.heads
    per_layer = s * b * h * (34 + 5 * a * s / h)
    logits = s * b * shape.vocab * 4
    if checkpointing:
        return 2 * s * b * h * shape.layers + per_layer + logits
    return per_layer * shape.layers + logits


def _kv_element_bytes(precision: str) -> float:
    return {"fp32": 4.0, "fp8": 1.0}.get(precision, 2.0)


def estimate(shape: ModelShape, usage: Usage) -> Breakdown:
    """GPU memory for ``usage`` on a model of ``shape``, part by part."""
    w = usage
    if w.task not in TASKS:
        raise EstimateError(f"Unknown task {w.task!r}; use one of {', '.join(TASKS)}.")
    if w.precision not in BYTES:
        raise EstimateError(f"Unknown precision {w.precision!r}; use one of {', '.join(BYTES)}.")
    if w.optimizer not in ADAM_BYTES:
        raise EstimateError(f"Unknown optimizer {w.optimizer!r}.")
    if w.context < 1 or w.batch < 1 or w.lora_rank < 1:
        raise EstimateError("Context, batch and rank must be at least 1.")
    p = shape.params
    parts: list[Part] = []
    reserve = Part("reserve", RESERVE_BYTES, "1 GiB for the CUDA context and workspaces")
    if w.task == INFERENCE:
        size = BYTES[w.precision]
        kv_b = _kv_element_bytes(w.precision)
        parts.append(Part("weights", p * size, f"{_b(p)} parameters × {size:g} bytes"))
        parts.append(
            Part(
                "kv_cache",
                kv_cache_bytes(shape, context=w.context, batch=w.batch, element_bytes=kv_b),
                f"2 × {shape.layers} layers × {shape.kv_heads} KV heads × {shape.head_dim} × "
                f"{w.context} tokens × batch {w.batch} × {kv_b:g} bytes",
            )
        )
        return Breakdown(shape, w, (*parts, reserve))
    activations = Part(
        "activations",
        activation_bytes(shape, context=w.context, batch=w.batch, checkpointing=w.checkpointing),
        f"{w.context} tokens × batch {w.batch}, "
        + ("with activation checkpointing" if w.checkpointing else "no checkpointing"),
    )
    if w.task in (LORA, QLORA):
        size = NF4_DOUBLE_QUANT_BYTES if w.task == QLORA else BYTES[w.precision]
        what = "4-bit NF4 + double-quantised constants" if w.task == QLORA else w.precision
        adapters = adapter_params(shape, w.lora_rank)
        parts.append(Part("weights", p * size, f"{_b(p)} frozen parameters × {size:.3g} ({what})"))
        parts.append(
            Part(
                "adapters",
                adapters * ADAPTER_BYTES,
                f"{_b(adapters)} adapter parameters (rank {w.lora_rank}, every linear layer) "
                f"× {ADAPTER_BYTES:g} bytes (weights, gradients, Adam moments)",
            )
        )
        return Breakdown(shape, w, (*parts, activations, reserve))
    compute = BYTES[w.precision]
    master = MASTER_BYTES if w.master_weights and compute < 4 else 0.0
    parts.append(
        Part(
            "weights",
            p * (compute + master),
            f"{_b(p)} parameters × {compute + master:g} bytes"
            + (" (16-bit copy + 32-bit master)" if master else ""),
        )
    )
    parts.append(Part("gradients", p * compute, f"{_b(p)} × {compute:g} bytes"))
    adam = ADAM_BYTES[w.optimizer]
    parts.append(Part("optimizer", p * adam, f"{_b(p)} × {adam:g} bytes ({w.optimizer} moments)"))
    return Breakdown(shape, w, (*parts, activations, reserve))


def _b(count: float) -> str:
    if count >= 1e9:
        return f"{count / 1e9:.3g} B"
    return f"{count / 1e6:.3g} M"
