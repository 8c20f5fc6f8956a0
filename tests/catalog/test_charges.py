"""The charge of a request is never less than the share of the GPU the cluster grants it."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apps.catalog.core import (
    SHARING_HAMI,
    SHARING_MIG,
    SHARING_TIMESLICE,
    SHARING_WHOLE,
    GpuClassSpec,
    mig_profile_memory_mib,
)
from apps.catalog.resources import ResourceMappingError, charged_milli, gpu_resources

MIG_SETS = (
    ("1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    ("1g.10gb", "7g.80gb"),
    ("3g.40gb",),
)


@st.composite
def gpu_classes(draw: st.DrawFn) -> GpuClassSpec:
    mode = draw(st.sampled_from((SHARING_WHOLE, SHARING_TIMESLICE, SHARING_MIG, SHARING_HAMI)))
    if mode == SHARING_MIG:
        return GpuClassSpec(
            name="A100-80GB",
            sharing_mode=mode,
            memory_mib=draw(st.sampled_from((81920, 81559))),
            mig_profiles=draw(st.sampled_from(MIG_SETS)),
        )
    memory = draw(st.sampled_from((24576, 46068, 49152, 81920, 143771)))
    if mode == SHARING_TIMESLICE:
        replicas = draw(st.integers(min_value=2, max_value=16))
        return GpuClassSpec("L4", mode, memory, timeslice_replicas=replicas)
    if mode == SHARING_HAMI:
        return GpuClassSpec("L40S", mode, memory, hami_split_count=4)
    return GpuClassSpec("H100", mode, memory)


def granted_share(milli: int, gpu: GpuClassSpec) -> Fraction:
    """The share of GPUs (in milli) the Kubernetes resources of one replica physically hold."""
    limits = gpu_resources(milli, gpu).limits
    if "nvidia.com/gpumem" in limits:
        count = int(limits["nvidia.com/gpu"])
        cores = Fraction(int(limits["nvidia.com/gpucores"]) * 1000, 100)
        memory = Fraction(int(limits["nvidia.com/gpumem"]) * 1000, gpu.memory_mib)
        return count * max(cores, memory)
    if "nvidia.com/gpu" in limits:
        return Fraction(int(limits["nvidia.com/gpu"]) * 1000)
    if "nvidia.com/gpu.shared" in limits:
        return Fraction(int(limits["nvidia.com/gpu.shared"]) * 1000, gpu.timeslice_replicas or 1)
    (resource,) = limits
    profile = resource.removeprefix("nvidia.com/mig-")
    slices = int(profile.split("g.")[0])
    memory_share = Fraction((mig_profile_memory_mib(profile) or 0) * 1000, gpu.memory_mib)
    return min(Fraction(1000), max(Fraction(slices * 1000, 7), memory_share))


@given(gpu=gpu_classes(), milli=st.integers(min_value=1, max_value=8000))
def test_every_accepted_request_is_charged_at_least_what_the_cluster_grants(
    gpu: GpuClassSpec, milli: int
) -> None:
    try:
        share = granted_share(milli, gpu)
    except ResourceMappingError:
        with pytest.raises(ResourceMappingError):
            charged_milli(milli, gpu)
        return
    charged = charged_milli(milli, gpu)
    assert charged >= share
    assert charged >= milli
    # Never more than one milli above the grant (rounding up to a whole milli), except
    # HAMi's cores, whose percent steps the grant itself rounds to.
    assert charged < share + 1 or gpu.sharing_mode == SHARING_HAMI


@pytest.mark.parametrize(
    ("gpu", "milli", "charged"),
    [
        (GpuClassSpec("L4", SHARING_TIMESLICE, 24576, timeslice_replicas=4), 1, 250),
        (GpuClassSpec("L4", SHARING_TIMESLICE, 24576, timeslice_replicas=4), 251, 500),
        (GpuClassSpec("L4", SHARING_TIMESLICE, 24576, timeslice_replicas=3), 1, 334),
        (GpuClassSpec("H100", SHARING_WHOLE, 81920), 1, 1000),
        (GpuClassSpec("H100", SHARING_WHOLE, 81920), 2000, 2000),
        (GpuClassSpec("A100", SHARING_MIG, 81920, mig_profiles=MIG_SETS[0]), 100, 143),
        (GpuClassSpec("A100", SHARING_MIG, 81920, mig_profiles=MIG_SETS[0]), 500, 500),
        (GpuClassSpec("A100", SHARING_MIG, 81920, mig_profiles=MIG_SETS[0]), 501, 1000),
        (GpuClassSpec("L40S", SHARING_HAMI, 81920, hami_split_count=4), 1, 10),
        (GpuClassSpec("L40S", SHARING_HAMI, 81920, hami_split_count=4), 500, 500),
        (GpuClassSpec("L40S", SHARING_HAMI, 81920, hami_split_count=4), 1500, 2000),
    ],
)
def test_charge_per_sharing_mode(gpu: GpuClassSpec, milli: int, charged: int) -> None:
    assert charged_milli(milli, gpu) == charged
