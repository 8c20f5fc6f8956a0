"""The sizing helper and the amounts offered per class, on plain data."""

from __future__ import annotations

import pytest

from apps.catalog.resources import GpuClassSpec
from apps.workloads import sizing

H100 = GpuClassSpec("H100-80GB", "whole", 81559, "NVIDIA-H100-80GB-HBM3")
A100_MIG = GpuClassSpec(
    "A100-80GB-MIG",
    "mig",
    81920,
    "NVIDIA-A100-SXM4-80GB",
    mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"),
)
L40S_TS = GpuClassSpec("L40S-48GB", "timeslice", 46068, "NVIDIA-L40S", timeslice_replicas=4)
A100_HAMI = GpuClassSpec("A100-80GB-vGPU", "hami", 81920, "NVIDIA-A100", hami_split_count=4)

CLASSES = [
    sizing.SizingClass(1, 4.5, H100),
    sizing.SizingClass(2, 3.0, A100_MIG),
    sizing.SizingClass(3, 1.6, L40S_TS),
    sizing.SizingClass(4, 3.0, A100_HAMI),
]


def test_whole_gpu_class_offers_no_fractions() -> None:
    assert sizing.fraction_choices(H100) == []
    assert sizing.amount_choices(H100) == [1000, 2000, 4000, 8000]


def test_mig_class_offers_one_fraction_per_profile_and_one_whole_gpu() -> None:
    assert sizing.fraction_choices(A100_MIG) == [125, 250, 500]
    assert sizing.amount_choices(A100_MIG) == [125, 250, 500, 1000]


def test_mig_class_without_a_full_profile_offers_no_whole_gpu() -> None:
    small = GpuClassSpec("A100-MIG", "mig", 81920, "x", mig_profiles=("1g.10gb", "3g.40gb"))
    assert sizing.amount_choices(small) == [125, 500]


def test_timeslice_and_hami_offer_one_fraction_per_slice() -> None:
    assert sizing.fraction_choices(L40S_TS) == [250, 500, 750]
    assert sizing.fraction_choices(A100_HAMI) == [250, 500, 750]


def test_every_offered_fraction_maps_to_the_profile_it_is_named_after() -> None:
    descriptions = [sizing.describe_amount(m, A100_MIG) for m in sizing.fraction_choices(A100_MIG)]
    assert descriptions == [
        "0.125 × A100-80GB-MIG → MIG 1g.10gb",
        "0.25 × A100-80GB-MIG → MIG 2g.20gb",
        "0.5 × A100-80GB-MIG → MIG 3g.40gb",
    ]
    assert "no memory isolation" in sizing.describe_amount(250, L40S_TS)


def test_memory_estimate_is_the_sum_of_the_memory_cores_parts() -> None:
    # 7 B × 2 bytes = 13.04 GiB of weights, a 1-token KV cache and the 1 GiB reserve.
    short = sizing.estimate_memory_mib(7, "bf16", "inference", context=1)
    assert short == pytest.approx(7e9 * 2 / 2**20 + 1024, abs=2)
    assert sizing.estimate_memory_mib(7, "int4", "inference", context=1) < short / 3
    # Full fine-tune: 16 bytes a parameter before activations, never the old 4.8 × 2 bytes.
    assert sizing.estimate_memory_mib(7, "bf16", "full") > 7e9 * 16 / 2**20
    # Longer contexts and bigger batches need more (the KV cache).
    assert sizing.estimate_memory_mib(7, "bf16", "inference", context=32768, batch=4) > 2 * short


@pytest.mark.parametrize(
    ("precision", "task", "params"),
    [("fp64", "inference", 7), ("bf16", "pretrain", 7), ("bf16", "inference", 0)],
)
def test_sizing_refuses_unknown_precision_task_or_size(
    precision: str, task: str, params: float
) -> None:
    with pytest.raises(sizing.SizingError):
        sizing.estimate_memory_mib(params, precision, task)


def test_small_model_inference_is_suggested_the_cheapest_fraction_that_fits() -> None:
    estimate = sizing.size_request(
        params_billions=7, precision="bf16", task="inference", classes=CLASSES, context=1024
    )
    assert "weights 13.0 GiB (7 B parameters × 2 bytes)" in estimate.formula
    assert "14.6 GiB" in estimate.formula
    by_class = {o.gpu_class: o for o in estimate.options}
    # 14.6 GiB: MIG needs 2g.20gb, a quarter of the L40S has only 11 GiB so it takes half.
    assert by_class["A100-80GB-MIG"].gpu_milli == 250
    assert by_class["A100-80GB-MIG"].description.endswith("MIG 2g.20gb")
    assert by_class["L40S-48GB"].gpu_milli == 500
    assert by_class["H100-80GB"].gpu_milli == 1000
    # Priced as billed: 2g.20gb holds 2 of the 7 compute slices (0.286 × 3.0), the HAMi quarter
    # exactly a quarter (0.25 × 3.0), so the vGPU is the cheaper one.
    assert by_class["A100-80GB-MIG"].hourly_cost == 0.858
    assert estimate.suggestion is not None
    assert estimate.suggestion.gpu_class == "A100-80GB-vGPU"
    assert estimate.suggestion.hourly_cost == 0.75
    assert any("Time-sliced" in note for note in estimate.notes)


def test_large_full_fine_tune_needs_several_whole_gpus() -> None:
    # 13 B with AdamW in mixed precision: 16 bytes a parameter (≈ 208 GB) before activations,
    # so two H100 (160 GB) would run out of memory: four, sharded.
    estimate = sizing.size_request(
        params_billions=13, precision="bf16", task="full", classes=CLASSES
    )
    assert estimate.memory_mib * 2**20 > 208e9
    by_class = {o.gpu_class: o for o in estimate.options}
    assert by_class["H100-80GB"].gpu_milli == 4000
    assert any("FSDP" in note for note in estimate.notes)
    assert "A100-80GB-MIG" not in by_class  # MIG: at most one GPU per replica


def test_model_too_large_for_any_replica_says_so() -> None:
    estimate = sizing.size_request(
        params_billions=405, precision="fp32", task="full", classes=CLASSES
    )
    assert estimate.options == ()
    assert estimate.suggestion is None
    assert "several nodes" in estimate.notes[0]


def test_time_sliced_amounts_never_say_more_slices_than_a_gpu_has() -> None:
    assert sizing.describe_amount(250, L40S_TS).startswith(
        "1 of the 4 time slices of one L40S-48GB — "
    )
    two = sizing.describe_amount(2000, L40S_TS)
    assert two.startswith("2 × L40S-48GB (all 4 time slices of each) — ")
    assert "8 of 4" not in two
    assert sizing.describe_amount(1500, L40S_TS).startswith(
        "1 × L40S-48GB (all 4 time slices of each) + 2 of the 4 time slices of one L40S-48GB"
    )
