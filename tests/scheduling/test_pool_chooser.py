"""Choosing a pool for a replica several pools could serve: bound demand learned online."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.scheduling import placement
from apps.scheduling.data import ReplicaPlacement
from apps.scheduling.fragmentation import FragModel, default_typical
from apps.scheduling.placement import GpuPool, PoolChooser
from apps.scheduling.units import Demand
from tests.scheduling.builders import A100_HAMI, nodes

ANY = None
SCARCE = frozenset({"scarce"})


def pool(prefix: str, count: int, gpus: int = 8, cpu_milli: int = 192_000) -> GpuPool:
    specs = nodes(A100_HAMI, count, gpus, cpu_milli=cpu_milli)
    named = tuple(replace(n, name=f"{prefix}-{i}") for i, n in enumerate(specs))
    return GpuPool(A100_HAMI, "hub", named, FragModel(default_typical(), 1000))


def common_and_scarce() -> tuple[GpuPool, GpuPool]:
    """Four nodes of a common model, one of a scarce one whose GPU 0 is half used, so that the
    pools' own score prefers the scarce node for a fraction (onto the partly used GPU)."""
    common, scarce = pool("common", 4), pool("scarce", 1)
    scarce.take(ReplicaPlacement("scarce-0", (0,), 500), 0, 0)
    return common, scarce


def test_without_bound_demand_the_score_alone_decides() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce})
    placed = chooser.place(Demand(500, 1), 500, ANY)
    assert placed is not None and placed[0] == "scarce"
    assert chooser.reserve("scarce") == 0.0


def test_free_replica_goes_to_the_common_model_rather_than_the_scarce_one() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce})
    assert chooser.place(Demand(1000, 4), 4000, SCARCE) is not None  # demand bound to it, seen
    placed = chooser.place(Demand(500, 1), 500, ANY)
    assert placed is not None and placed[0] == "common"


def test_bound_replica_still_lands_on_its_model() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce})
    chooser.place(Demand(1000, 4), 4000, SCARCE)
    placed = chooser.place(Demand(500, 1), 500, SCARCE)
    assert placed is not None and placed[0] == "scarce"
    assert placed[1].node == "scarce-0"


def test_bound_demand_takes_what_was_kept_for_it() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce})
    chooser.place(Demand(1000, 2), 2000, SCARCE)
    before = chooser.reserve("scarce")
    chooser.place(Demand(1000, 1), 1000, SCARCE)
    # All demand seen is bound to the scarce model: its whole capacity is expected, and what
    # bound demand took comes off what is kept.
    assert before == 8000 - 2000
    assert chooser.reserve("scarce") == before - 1000
    assert chooser.reserve("common") == 0.0


def test_free_replica_takes_reserved_room_rather_than_being_refused() -> None:
    common, scarce = pool("common", 1, gpus=1), pool("scarce", 1)
    chooser = PoolChooser({"common": common, "scarce": scarce})
    chooser.place(Demand(1000, 1), 1000, SCARCE)
    assert chooser.place(Demand(1000, 1), 1000, ANY) == (
        "common",
        ReplicaPlacement("common-0", (0,), 1000),
    )
    placed = chooser.place(Demand(1000, 1), 1000, ANY)  # the common model is full
    assert placed is not None and placed[0] == "scarce"


def test_replica_bound_to_several_models_prefers_the_one_less_in_demand() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce})
    chooser.place(Demand(1000, 4), 4000, SCARCE)
    placed = chooser.place(Demand(500, 1), 500, frozenset({"common", "scarce"}))
    assert placed is not None and placed[0] == "common"


def test_without_reserving_the_score_alone_decides_even_with_bound_demand() -> None:
    common, scarce = common_and_scarce()
    chooser = PoolChooser({"common": common, "scarce": scarce}, reserve=False)
    chooser.place(Demand(1000, 4), 4000, SCARCE)
    placed = chooser.place(Demand(500, 1), 500, ANY)
    assert placed is not None and placed[0] == "scarce"


def test_replica_of_no_gpu_goes_where_cpu_is_plentiful_beside_free_gpus() -> None:
    busy, idle = pool("busy", 1), pool("idle", 1)
    for gpu in range(8):  # every GPU of the busy node taken, its CPU left over
        busy.take(ReplicaPlacement("busy-0", (gpu,), 1000), 0, 0)
    chooser = PoolChooser({"idle": idle, "busy": busy})
    placed = chooser.place(Demand(0, 0, 16_000, 1024), 0, ANY)
    assert placed is not None and placed[0] == "busy"


def lean_and_roomy() -> PoolChooser:
    """One core per GPU on the lean node, 24 on the roomy one; best fit alone prefers the lean
    node (it is left fuller)."""
    return PoolChooser({"lean": pool("lean", 1, cpu_milli=8_000), "roomy": pool("roomy", 1)})


def test_gpu_replica_keeps_off_the_pool_whose_gpus_its_cpu_would_strand() -> None:
    placed = lean_and_roomy().place(Demand(500, 1, 4_000, 1024), 500, ANY)
    assert placed == ("roomy", ReplicaPlacement("roomy-0", (0,), 500))


def test_without_the_balance_points_best_fit_takes_the_lean_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(placement, "BALANCE_POINTS", 0)
    placed = lean_and_roomy().place(Demand(500, 1, 4_000, 1024), 500, ANY)
    assert placed is not None and placed[0] == "lean"


REQUESTS = st.lists(
    st.tuples(
        st.sampled_from([250, 500, 1000]),  # units per GPU
        st.integers(1, 4),  # GPUs (fractions on one)
        st.sampled_from([ANY, SCARCE, frozenset({"common"}), frozenset({"common", "scarce"})]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(REQUESTS)
def test_a_replica_is_refused_only_when_none_of_its_pools_can_hold_it(
    requests: list[tuple[int, int, frozenset[str] | None]],
) -> None:
    pools = {"common": pool("common", 2, gpus=4), "scarce": pool("scarce", 1, gpus=4)}
    chooser = PoolChooser(pools)
    for units, gpus, allowed in requests:
        demand = Demand(units, 1) if units < 1000 else Demand(1000, gpus)
        milli = units if units < 1000 else 1000 * gpus
        names = [n for n in pools if allowed is None or n in allowed]
        could = any(pools[n].find(demand) is not None for n in names)
        placed = chooser.place(demand, milli, allowed)
        assert (placed is not None) == could
        if placed is not None:
            assert placed[0] in names
        assert all(chooser.reserve(n) >= 0.0 for n in pools)
