"""The GPU memory estimate against published figures for named models and methods (each
within 15%), and how it responds to context, batch, rank and checkpointing. Plain data."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.workloads import memory

GB = 1e9
TOLERANCE = 0.15

# Shapes as published in each model's configuration.
OPT_13B = memory.shape_of(12.85, layers=40, hidden=5120, heads=40, intermediate=20480)
GPT2_XL = memory.shape_of(1.56, layers=48, hidden=1600, heads=25, intermediate=6400, vocab=50257)
LLAMA_65B = memory.shape_of(65.2, layers=80, hidden=8192, heads=64, intermediate=22016)
LLAMA2_70B = memory.shape_of(69.0, layers=80, hidden=8192, heads=64, kv_heads=8, intermediate=28672)


def within(estimate: float, published: float) -> bool:
    return abs(estimate - published) <= TOLERANCE * published


def test_kv_cache_of_opt_13b_matches_the_vllm_paper() -> None:
    # Kwon et al., "Efficient Memory Management for Large Language Model Serving with
    # PagedAttention", SOSP 2023 (arXiv:2309.06180), section 3: the KV cache of one token of
    # OPT-13B takes 800 KB (2 × 5120 × 40 × 2 bytes), so one 2048-token request takes up to
    # 1.6 GB.
    one = memory.kv_cache_bytes(OPT_13B, context=1, batch=1, element_bytes=2)
    assert within(one, 800e3)
    usage = memory.Usage(task=memory.INFERENCE, precision="bf16", context=2048, batch=1)
    assert within(memory.estimate(OPT_13B, usage).part("kv_cache"), 1.6 * GB)


def test_full_fine_tune_of_gpt2_xl_matches_the_zero_paper() -> None:
    # Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
    # Models", SC 2020 (arXiv:1910.02054), section 3.1: mixed-precision Adam needs 16 bytes per
    # parameter of model states, so a 1.5B-parameter GPT-2 needs at least 24 GB.
    usage = memory.Usage(task=memory.FULL, precision="bf16", context=1024)
    found = memory.estimate(GPT2_XL, usage)
    assert within(found.model_state_bytes, 24 * GB)
    assert found.total_bytes > found.model_state_bytes  # activations come on top


def test_full_fine_tune_of_7_5b_matches_zero_figure_1_baseline() -> None:
    # ZeRO (as above), Figure 1: a 7.5B-parameter model with K = 12 (Adam) needs
    # (2 + 2 + K) × Ψ = 120 GB of model states per GPU without partitioning.
    shape = memory.shape_of(7.5)
    found = memory.estimate(shape, memory.Usage(task=memory.FULL, precision="bf16"))
    assert within(found.model_state_bytes, 120 * GB)


def test_16_bit_full_fine_tune_of_llama_65b_matches_the_qlora_paper() -> None:
    # Dettmers et al., "QLoRA: Efficient Finetuning of Quantized LLMs", NeurIPS 2023
    # (arXiv:2305.14314), abstract and introduction: regular 16-bit finetuning of a LLaMA 65B
    # model requires more than 780 GB of GPU memory (16-bit weights and gradients, 32-bit Adam
    # moments: 12 bytes per parameter, no master copy).
    usage = memory.Usage(task=memory.FULL, precision="bf16", master_weights=False)
    found = memory.estimate(LLAMA_65B, usage)
    assert within(found.model_state_bytes, 780 * GB)
    assert found.total_bytes > 780 * GB


def test_qlora_of_llama_65b_fits_one_48_gb_gpu_as_the_qlora_paper_reports() -> None:
    # QLoRA (as above), abstract: QLoRA finetunes a 65B-parameter model on a single 48 GB GPU
    # (NF4 with double quantisation, 4.127 bits per parameter, section 3; LoRA r = 64 on every
    # linear layer, section 4 and appendix B; sequence 512, batch 1 with checkpointing).
    usage = memory.Usage(task=memory.QLORA, context=512, batch=1, lora_rank=64)
    total = memory.estimate(LLAMA_65B, usage).total_bytes
    assert total <= 48 * GB
    assert within(total, 48 * GB)


def test_kv_cache_of_llama2_70b_with_grouped_query_attention() -> None:
    # Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models" (arXiv:2307.09288),
    # section 2.2 and table 1: the 70B model uses grouped-query attention with 8 key-value
    # heads to cut the KV cache. Not one of the published memory figures above: the cache
    # that follows from the architecture (2 × 8 × 128 × 2 bytes per layer and token, 320 KiB
    # over 80 layers), an eighth of what 64 heads would keep.
    with_gqa = memory.kv_cache_bytes(LLAMA2_70B, context=1, batch=1, element_bytes=2)
    assert within(with_gqa, 320 * 1024)
    without = memory.shape_of(69.0, layers=80, hidden=8192, heads=64, intermediate=28672)
    assert within(memory.kv_cache_bytes(without, context=1, batch=1, element_bytes=2), 8 * with_gqa)


def test_13b_full_fine_tune_needs_about_16_bytes_per_parameter_before_activations() -> None:
    found = memory.estimate(memory.shape_of(13), memory.Usage(task=memory.FULL))
    assert found.model_state_bytes == pytest.approx(13e9 * 16)
    assert found.total_bytes > 208 * GB


def test_activation_checkpointing_saves_memory_and_qlora_less_than_lora() -> None:
    shape = memory.shape_of(7)
    plain = memory.Usage(task=memory.FULL, context=4096, batch=4, checkpointing=False)
    saved = memory.Usage(task=memory.FULL, context=4096, batch=4, checkpointing=True)
    assert memory.estimate(shape, saved).total_bytes < memory.estimate(shape, plain).total_bytes
    lora = memory.estimate(shape, memory.Usage(task=memory.LORA)).total_bytes
    qlora = memory.estimate(shape, memory.Usage(task=memory.QLORA)).total_bytes
    full = memory.estimate(shape, memory.Usage(task=memory.FULL)).total_bytes
    assert qlora < lora < full


@given(
    params=st.floats(0.1, 200),
    context=st.integers(1, 32_768),
    batch=st.integers(1, 64),
    task=st.sampled_from(memory.TASKS),
)
def test_more_context_or_batch_never_needs_less_memory(
    params: float, context: int, batch: int, task: str
) -> None:
    shape = memory.shape_of(params)
    base = memory.estimate(shape, memory.Usage(task=task, context=context, batch=batch))
    longer = memory.estimate(shape, memory.Usage(task=task, context=context + 1, batch=batch))
    wider = memory.estimate(shape, memory.Usage(task=task, context=context, batch=batch + 1))
    assert longer.total_bytes >= base.total_bytes
    assert wider.total_bytes >= base.total_bytes
    assert base.total_bytes >= base.part("weights") > 0


def test_default_shape_is_stated_and_close_to_the_parameter_count() -> None:
    shape = memory.default_shape(7)
    assert not shape.stated
    assert within(12 * shape.layers * shape.hidden**2, 7e9)


@pytest.mark.parametrize(
    "usage",
    [
        memory.Usage(task="pretrain"),
        memory.Usage(precision="fp64"),
        memory.Usage(context=0),
        memory.Usage(optimizer="lion"),
    ],
)
def test_unusable_inputs_are_refused(usage: memory.Usage) -> None:
    with pytest.raises(memory.EstimateError):
        memory.estimate(memory.shape_of(7), usage)


def test_unusable_shapes_are_refused() -> None:
    with pytest.raises(memory.EstimateError):
        memory.shape_of(0)
    with pytest.raises(memory.EstimateError):
        memory.shape_of(7, hidden=4096, heads=30)
    with pytest.raises(memory.EstimateError):
        memory.shape_of(7, hidden=4096, heads=32, kv_heads=5)
