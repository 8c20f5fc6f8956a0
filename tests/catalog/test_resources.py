from __future__ import annotations

import pytest

from apps.catalog.resources import GpuClassSpec, ResourceMappingError, gpu_resources

H100 = GpuClassSpec("H100-80GB", "whole", 81559, "NVIDIA-H100-80GB-HBM3")
L40S = GpuClassSpec("L40S-48GB", "timeslice", 46068, "NVIDIA-L40S", timeslice_replicas=4)
A100_MIG = GpuClassSpec(
    "A100-80GB",
    "mig",
    81920,
    "NVIDIA-A100-SXM4-80GB",
    mig_profiles=("3g.40gb", "1g.10gb", "2g.20gb", "7g.80gb"),
)
A100_HAMI = GpuClassSpec("A100-vGPU", "hami", 81920, "NVIDIA-A100-SXM4-80GB", hami_split_count=10)


@pytest.mark.parametrize(
    ("milli", "limits"),
    [
        (1000, {"nvidia.com/gpu": "1"}),
        (4000, {"nvidia.com/gpu": "4"}),
        (250, {"nvidia.com/gpu": "1"}),
    ],
)
def test_whole_mode_rounds_up_to_whole_gpus(milli: int, limits: dict[str, str]) -> None:
    assert gpu_resources(milli, H100).limits == limits


def test_whole_mode_says_a_fraction_was_rounded_up() -> None:
    assert "rounded up from 0.25" in gpu_resources(250, H100).description


@pytest.mark.parametrize(("milli", "slots"), [(250, "1"), (500, "2"), (300, "2"), (1000, "4")])
def test_timeslice_asks_for_replica_slots(milli: int, slots: str) -> None:
    result = gpu_resources(milli, L40S)
    assert result.limits == {"nvidia.com/gpu.shared": slots}
    assert result.memory_isolated is False
    assert "no memory isolation" in result.description


@pytest.mark.parametrize(
    ("milli", "profile"),
    [
        (100, "1g.10gb"),
        (125, "1g.10gb"),
        (126, "2g.20gb"),
        (250, "2g.20gb"),
        (500, "3g.40gb"),
        (1000, "7g.80gb"),
    ],
)
def test_mig_takes_the_smallest_profile_that_holds_the_memory(milli: int, profile: str) -> None:
    result = gpu_resources(milli, A100_MIG)
    assert result.limits == {f"nvidia.com/mig-{profile}": "1"}
    assert result.description == f"{milli / 1000:g} × A100-80GB → MIG {profile}"


def test_mig_refuses_more_than_its_largest_profile() -> None:
    small = GpuClassSpec("A100", "mig", 81920, "x", mig_profiles=("1g.10gb", "2g.20gb"))
    with pytest.raises(ResourceMappingError, match=r"largest offered is 2g\.20gb"):
        gpu_resources(500, small)
    with pytest.raises(ResourceMappingError, match="at most one GPU"):
        gpu_resources(2000, A100_MIG)


def test_hami_fraction_gets_memory_and_cores() -> None:
    assert gpu_resources(250, A100_HAMI).limits == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "20480",
        "nvidia.com/gpucores": "25",
    }


def test_hami_whole_gpus() -> None:
    assert gpu_resources(2000, A100_HAMI).limits == {
        "nvidia.com/gpu": "2",
        "nvidia.com/gpumem": "81920",
        "nvidia.com/gpucores": "100",
    }


def test_non_positive_amount_is_refused() -> None:
    with pytest.raises(ResourceMappingError):
        gpu_resources(0, H100)
