"""Topology-aware gangs: replicas in one domain (rack, block, NVLink domain) when one holds
them, the smallest domain that fits, asks that require a level, and the cycle passing a
workload's ask to its placement."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.scheduling.core import schedule
from apps.scheduling.data import NodeSpec, ReplicaPlacement, TopologyAsk
from apps.scheduling.fragmentation import FragModel, default_typical
from apps.scheduling.placement import GpuPool, TopologyIndex, place_gang
from apps.scheduling.units import Demand
from tests.scheduling.builders import H100, nodes, quota, snapshot, waiting


def fleet(racks: dict[tuple[str, str], int]) -> tuple[NodeSpec, ...]:
    """Nodes named so that name order interleaves the racks (as hostnames often do)."""
    out = []
    names = iter(range(10_000))
    for (block, rack), count in racks.items():
        for _ in range(count):
            out.append(
                replace(
                    nodes(H100, 1)[0],
                    name=f"n{next(names) * 7919 % 10_007:05d}",
                    topology=(("block", block), ("rack", rack)),
                )
            )
    return tuple(out)


def pool_of(fleet_nodes: tuple[NodeSpec, ...]) -> GpuPool:
    return GpuPool(H100, "hub", fleet_nodes, FragModel(default_typical(), 1000))


def rack_of(pool: GpuPool, node: str) -> tuple[str, ...] | None:
    return pool.topology.domain_of(pool.by_name[node].spec, "rack")


def test_gang_goes_into_the_smallest_rack_that_holds_it() -> None:
    pool = pool_of(fleet({("b1", "r1"): 6, ("b1", "r2"): 3, ("b2", "r3"): 4}))
    gang = place_gang(pool, Demand(1000, 8), 3)
    assert gang is not None
    assert {rack_of(pool, r.node) for r in gang} == {("b1", "r2")}


def test_gang_too_large_for_any_rack_stays_in_one_block() -> None:
    pool = pool_of(fleet({("b1", "r1"): 2, ("b1", "r2"): 2, ("b2", "r3"): 3}))
    gang = place_gang(pool, Demand(1000, 8), 4)
    assert gang is not None
    assert {pool.topology.domain_of(pool.by_name[r.node].spec, "block") for r in gang} == {("b1",)}


def test_required_rack_waits_rather_than_spread_and_takes_nothing() -> None:
    pool = pool_of(fleet({("b1", "r1"): 2, ("b1", "r2"): 2}))
    before = pool.gpu_free_units()
    assert place_gang(pool, Demand(1000, 8), 3, TopologyAsk("rack", required=True)) is None
    assert pool.gpu_free_units() == before
    spread = place_gang(pool, Demand(1000, 8), 3, TopologyAsk("rack"))
    assert spread is not None and len({r.node for r in spread}) == 3


def test_required_level_the_nodes_do_not_carry_is_never_placed() -> None:
    pool = pool_of(fleet({("b1", "r1"): 4}))
    assert place_gang(pool, Demand(1000, 8), 2, TopologyAsk("nvlink", required=True)) is None


def test_racks_of_different_blocks_with_the_same_name_are_different_domains() -> None:
    index = TopologyIndex(fleet({("b1", "r1"): 2, ("b2", "r1"): 2}))
    assert sorted(index.domains[1]) == [("b1", "r1"), ("b2", "r1")]


def test_small_work_fills_one_rack_before_touching_the_next() -> None:
    pool = pool_of(fleet({("b1", "r1"): 3, ("b1", "r2"): 3}))
    used = {rack_of(pool, placed.node) for _ in range(3) if (placed := pool.place(Demand(1000, 8)))}
    assert len(used) == 1  # the other rack is left whole for a gang
    gang = place_gang(pool, Demand(1000, 8), 3, TopologyAsk("rack", required=True))
    assert gang is not None


def test_nodes_without_topology_place_gangs_as_before() -> None:
    pool = pool_of(nodes(H100, 3))
    gang = place_gang(pool, Demand(1000, 8), 3, TopologyAsk("rack"))
    assert gang is not None and sorted(r.node for r in gang) == ["h100-0", "h100-1", "h100-2"]


def test_cycle_holds_a_required_gang_until_one_rack_can_take_it() -> None:
    fleet_nodes = fleet({("b1", "r1"): 2, ("b1", "r2"): 2})
    job = replace(waiting(milli=8000, replicas=3), topology=TopologyAsk("rack", required=True))
    free = replace(waiting(milli=8000, replicas=3, age_s=-1), topology=TopologyAsk("rack"))
    result = schedule(
        snapshot(nodes=fleet_nodes, waiting=(job, free), quotas=(quota("vision", 0, 64_000),))
    )
    admitted = {a.workload_id: a for a in result.admissions}
    assert job.id not in admitted and free.id in admitted


@settings(max_examples=40, deadline=None)
@given(
    racks=st.lists(st.integers(1, 5), min_size=1, max_size=5),
    taken=st.lists(st.integers(0, 24), max_size=8),
    replicas=st.integers(2, 4),
)
def test_a_gang_is_inside_one_rack_whenever_some_rack_could_hold_it(
    racks: list[int], taken: list[int], replicas: int
) -> None:
    pool = pool_of(fleet({("b1", f"r{i}"): n for i, n in enumerate(racks)}))
    names = [n.spec.name for n in pool.nodes]
    for t in taken:
        pool.take(ReplicaPlacement(names[t % len(names)], (0,), 1000), 0, 0)
    free = pool.gpu_free_units()
    idle = {name for name, units in free.items() if all(u == 1000 for u in units)}
    could = any(
        sum(1 for i in members if pool.nodes[i].spec.name in idle) >= replicas
        for members in pool.topology.domains[1].values()
    )
    gang = place_gang(pool, Demand(1000, 8), replicas)
    assert (gang is not None) == (len(idle) >= replicas)  # topology never loses a placement
    if gang is not None:
        assert len({r.node for r in gang}) == replicas
        if could:
            assert len({rack_of(pool, r.node) for r in gang}) == 1
