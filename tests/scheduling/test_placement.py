"""Placement in one pool: packing fractions, whole GPUs on one node, gangs, MIG, slots."""

from __future__ import annotations

from dataclasses import replace

from apps.scheduling.data import ReplicaPlacement, TypicalRequest
from apps.scheduling.fragmentation import FragModel, default_typical
from apps.scheduling.placement import GpuPool, MigPool, place_gang
from apps.scheduling.units import Demand, replica_demand
from tests.scheduling.builders import A100_HAMI, A100_MIG, H100, L40S, nodes


def hami_pool(count: int = 2, gpus: int = 8) -> GpuPool:
    return GpuPool(
        A100_HAMI, "hub", nodes(A100_HAMI, count, gpus), FragModel(default_typical(), 1000)
    )


def test_fraction_goes_onto_a_partly_used_gpu_keeping_whole_gpus_free() -> None:
    pool = hami_pool()
    first = pool.place(Demand(500, 1))
    second = pool.place(Demand(250, 1))
    assert first is not None and second is not None
    assert (second.node, second.gpus) == (first.node, first.gpus)
    free = pool.gpu_free_units()
    assert sorted(free[first.node]) == [250] + [1000] * 7
    assert all(units == 1000 for node, gpus in free.items() if node != first.node for units in gpus)


def test_fraction_prefers_the_gpu_it_fills_exactly_over_one_it_would_leave_a_sliver_on() -> None:
    pool = hami_pool(count=1)
    pool.take(ReplicaPlacement("a100-0", (0,), 700), 0, 0)  # 300 free on GPU 0
    pool.take(ReplicaPlacement("a100-0", (1,), 500), 0, 0)  # 500 free on GPU 1
    placed = pool.place(Demand(500, 1))
    assert placed is not None and placed.gpus == (1,)


def test_whole_gpus_of_a_replica_are_on_one_node() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 2), FragModel(default_typical(), 1000))
    pool.take(ReplicaPlacement("h100-0", (0, 1, 2), 1000), 0, 0)
    placed = pool.place(Demand(1000, 6))
    assert placed is not None and placed.node == "h100-1" and len(placed.gpus) == 6
    assert pool.place(Demand(1000, 6)) is None  # 5 free on one node, 2 on the other


def test_gang_is_placed_whole_or_not_at_all() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 2), FragModel(default_typical(), 1000))
    gang = place_gang(pool, Demand(1000, 8), 2)
    assert gang is not None and {r.node for r in gang} == {"h100-0", "h100-1"}
    pool2 = GpuPool(H100, "hub", nodes(H100, 2), FragModel(default_typical(), 1000))
    pool2.take(ReplicaPlacement("h100-1", (0,), 1000), 0, 0)
    assert place_gang(pool2, Demand(1000, 8), 2) is None
    assert pool2.gpu_free_units()["h100-0"] == [1000] * 8  # the first replica was undone


def test_gang_replicas_that_would_fit_on_one_node_go_to_different_nodes() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 2), FragModel(default_typical(), 1000))
    gang = place_gang(pool, Demand(1000, 4), 2)
    assert gang is not None and sorted(r.node for r in gang) == ["h100-0", "h100-1"]
    assert pool.gpu_free_units() == {"h100-0": [0] * 4 + [1000] * 4, "h100-1": [0] * 4 + [1000] * 4}


def test_gang_with_more_replicas_than_nodes_is_not_placed_and_takes_nothing() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 2), FragModel(default_typical(), 1000))
    assert place_gang(pool, Demand(1000, 1), 3) is None
    assert pool.gpu_free_units() == {"h100-0": [1000] * 8, "h100-1": [1000] * 8}
    # The nodes set aside while searching are back: a single replica still finds one.
    assert pool.place(Demand(1000, 8)) is not None and pool.place(Demand(1000, 8)) is not None


def test_mig_gang_takes_one_instance_on_each_of_distinct_nodes() -> None:
    full = replace(A100_MIG, mig_profiles=("7g.80gb",))
    fleet = tuple(replace(n, mig_layout=("7g.80gb",)) for n in nodes(full, 3, gpus=2))
    pool = MigPool(full, "hub", fleet)
    demand = replica_demand(full, 1000)
    gang = place_gang(pool, demand, 3)
    assert gang is not None and len({r.node for r in gang}) == 3
    assert place_gang(pool, demand, 4) is None
    assert pool.place(demand) is not None  # each node still has its second GPU


def test_cpu_and_memory_of_the_node_bound_placement() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 1, cpu_milli=4000), FragModel(default_typical(), 1000))
    assert pool.place(Demand(1000, 1, cpu_milli=3000)) is not None
    assert pool.place(Demand(1000, 1, cpu_milli=3000)) is None


def test_mig_request_takes_the_smallest_profile_and_fills_used_gpus_first() -> None:
    demand = replica_demand(A100_MIG, 100)
    assert demand.mig_profile == "1g.10gb"
    assert replica_demand(A100_MIG, 400).mig_profile == "3g.40gb"
    pool = MigPool(A100_MIG, "hub", nodes(A100_MIG, 1))
    first = pool.place(demand)
    second = pool.place(demand)
    assert first is not None and second is not None
    assert first.gpus == second.gpus and {first.mig_slot, second.mig_slot} == {0, 1}
    third = pool.place(demand)
    assert third is not None and third.gpus != first.gpus  # that GPU has no 1g.10gb left


def test_time_sliced_request_takes_replica_slots_of_one_gpu() -> None:
    demand = replica_demand(L40S, 500)
    assert (demand.units, demand.gpus) == (2, 1)
    pool = GpuPool(L40S, "hub", nodes(L40S, 1, gpus=1), FragModel(default_typical(), 4))
    assert pool.place(demand) is not None
    assert pool.place(replica_demand(L40S, 250)) is not None
    assert pool.place(replica_demand(L40S, 500)) is None  # 1 of 4 slots left
    assert pool.place(replica_demand(L40S, 250)) is not None
    assert pool.gpu_free_units() == {"l40s-0": [0]}


def test_hami_gpu_holds_at_most_split_count_vgpus() -> None:
    pool = hami_pool(count=1, gpus=1)
    for _ in range(10):
        assert pool.place(Demand(50, 1)) is not None
    assert pool.place(Demand(50, 1)) is None
    assert pool.gpu_vgpus() == {"a100-0": [10]}


def test_released_capacity_can_be_placed_again() -> None:
    pool = GpuPool(H100, "hub", nodes(H100, 1), FragModel(default_typical(), 1000))
    placed = pool.place(Demand(1000, 8))
    assert placed is not None and pool.place(Demand(1000, 1)) is None
    pool.release(placed, 0, 0)
    assert pool.place(Demand(1000, 1)) is not None


def test_fragmentation_counts_free_parts_typical_requests_cannot_use() -> None:
    model = FragModel([TypicalRequest(500, 1, 0, 1.0)], 1000)
    level = model.level(10_000)
    # GPUs with 300 and 1000 free: 300 is a fragment for a 500 request.
    assert model.frag(level, (300 << 8, 1000 << 8)) == 300
    # Nothing at all fits: every free unit is a fragment.
    assert model.frag(level, (300 << 8, 400 << 8)) == 700
