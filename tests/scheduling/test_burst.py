"""Burst clusters on plain data: the scheduler offers a burst cluster only to work that waited
its class's burst wait and whose team may burst, and tells what bursting costs."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from apps.catalog.core import GpuClassSpec
from apps.scheduling import burst, core
from apps.scheduling.data import NodeSpec, Quota, Snapshot, WaitingWorkload

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
TERMS = burst.BurstTerms(
    clusters={"cloud": Decimal("9.50")},
    class_prices={"H100": Decimal("4.50")},
    teams=frozenset({"vision"}),
    waits={"training": 600, "batch": 3600},
    capacity={"H100": frozenset({"cloud"})},
)


def node(name: str, cluster: str) -> NodeSpec:
    return NodeSpec(
        name=name, cluster=cluster, gpu_class="H100", gpu_count=8, cpu_milli=0, memory_mib=0
    )


def waiting(team: str, waited: int, priority: str = "training") -> WaitingWorkload:
    return WaitingWorkload(
        id=waited * 10 + len(team) + len(priority),
        team=team,
        owner="ann",
        gpu_class="H100",
        priority=priority,
        gpu_milli=8000,
        replicas=1,
        submitted_at=NOW - timedelta(seconds=waited),
    )


def snapshot(*ws: WaitingWorkload, hub_free: bool = False) -> Snapshot:
    spec = GpuClassSpec(name="H100", sharing_mode="whole", memory_mib=81559)
    nodes = [node("cloud-0", "cloud"), node("cloud-1", "cloud")]
    if hub_free:
        nodes.append(node("hub-0", "hub"))
    return Snapshot(
        now=NOW,
        classes=(spec,),
        nodes=tuple(nodes),
        running=(),
        waiting=ws,
        quotas=tuple(
            Quota(team=t, gpu_class="H100", guaranteed_milli=16000, limit_milli=16000)
            for t in {w.team for w in ws}
        ),
        burst_clusters=frozenset(TERMS.clusters),
        may_burst=frozenset(burst.may_burst(ws, TERMS, NOW)),
    )


def test_only_teams_that_may_burst_after_their_class_wait_run_on_a_burst_cluster() -> None:
    early = waiting("vision", 599)
    ready = waiting("vision", 600)
    other = waiting("speech", 7200)
    batch = waiting("vision", 3000, "batch")
    result = core.schedule(snapshot(early, ready, other, batch))
    admitted = {a.workload_id: a for a in result.admissions}
    assert set(admitted) == {ready.id}
    assert admitted[ready.id].placement.cluster == "cloud"


def test_hub_and_spoke_are_preferred_even_for_work_that_may_burst() -> None:
    ready = waiting("vision", 7200)
    result = core.schedule(snapshot(ready, hub_free=True))
    (admission,) = result.admissions
    assert admission.placement.cluster == "hub"


def test_the_cost_is_told_before_and_after() -> None:
    early, ready = waiting("vision", 60), waiting("vision", 900)
    snap = snapshot(early, ready)
    result = burst.annotate(core.schedule(snap), snap, TERMS)
    (admission,) = result.admissions
    assert "burst cluster cloud" in admission.reason
    assert "76.00 per hour there (36.00 per hour on the hub and spoke clusters)" in (
        admission.reason
    )
    (info,) = result.waiting
    assert info.workload_id == early.id
    (note,) = [a for a in info.advice if "burst" in a]
    assert "from 2026-03-01 12:09 UTC" in note and "76.00 per hour" in note
    # A team that may not burst is told nothing about it.
    other = waiting("speech", 60)
    snap = snapshot(other)
    told = burst.annotate(core.schedule(snap), snap, TERMS)
    assert not any("burst" in a for info in told.waiting for a in info.advice)


def test_no_burst_cluster_means_nothing_changes() -> None:
    ready = waiting("vision", 7200)
    snap = replace(snapshot(ready), burst_clusters=frozenset(), may_burst=frozenset())
    result = core.schedule(snap)
    assert burst.annotate(result, snap, replace(TERMS, clusters={})) == result
