"""Topology-aware gang placement against topology-blind placement, in one run.

A fleet of ``--blocks`` × ``--racks`` × ``--nodes`` nodes of 8 GPUs (names interleave the
racks, as hostnames often do) takes the same seeded stream of jobs three times, through
``apps.scheduling.placement`` (``GpuPool`` and ``place_gang``, what the cycle uses):

* blind: the nodes carry no topology;
* aware: the nodes carry their block and rack; gangs ask nothing (they go inside the narrowest
  domain that holds them when one does, else spread);
* aware, rack required: gangs require one rack and wait until one holds them.

Jobs: ``--gang-share`` of them multi-node gangs (2 to 8 replicas of 8 GPUs, or 2 to 4 of 4),
the rest single-node (1, 2, 4 or 8 GPUs); Poisson arrivals at ``--load`` × the fleet's
capacity, exponential runtimes (mean ``--runtime`` s); a job that cannot be placed waits in
order of arrival, and each end retries the waiting ones (a later one may pass an earlier one
that does not fit). Printed per policy: the share of gangs placed inside one rack and inside
one block, the GPU allocation (time-weighted, while jobs arrive), the gangs' and the others'
mean wait, and the CPU seconds of the placement; then aware ÷ blind.

    .venv/bin/python bench/topology_bench.py [--blocks 2] [--racks 4] [--nodes 8]
                                             [--jobs 4000] [--load 0.9] [--seeds 3]
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.scheduling.data import GpuClassSpec, NodeSpec, ReplicaPlacement, TopologyAsk  # noqa: E402
from apps.scheduling.fragmentation import FragModel, default_typical  # noqa: E402
from apps.scheduling.placement import GpuPool, place_gang  # noqa: E402
from apps.scheduling.units import Demand  # noqa: E402

H100 = GpuClassSpec(name="H100", sharing_mode="whole", memory_mib=81559)
POLICIES = ("blind", "aware", "aware, rack required")


@dataclass(frozen=True)
class Job:
    id: int
    arrival: float
    runtime: float
    gpus: int  # per replica
    replicas: int


def fleet(blocks: int, racks: int, nodes: int) -> list[NodeSpec]:
    out = []
    count = blocks * racks * nodes
    for i in range(count):
        block, rest = divmod(i, racks * nodes)
        rack = rest // nodes
        out.append(
            NodeSpec(
                name=f"gpu-{(i * 7919) % 10_007:05d}",
                cluster="hub",
                gpu_class=H100.name,
                gpu_count=8,
                cpu_milli=192_000,
                memory_mib=2_000_000,
                topology=(("block", f"b{block}"), ("rack", f"b{block}-r{rack}")),
            )
        )
    return out


def jobs(
    count: int, *, gpus: int, load: float, runtime: float, gang_share: float, seed: int
) -> list[Job]:
    rng = random.Random(seed)  # noqa: S311 - a seeded simulation, not a secret
    shapes: list[tuple[int, int]] = []
    for _ in range(count):
        if rng.random() < gang_share:
            shapes.append((8, rng.randint(2, 8)) if rng.random() < 0.5 else (4, rng.randint(2, 4)))
        else:
            shapes.append((rng.choice((1, 2, 4, 8)), 1))
    mean_gpus = sum(g * r for g, r in shapes) / count
    rate = load * gpus / (mean_gpus * runtime)  # arrivals per second
    t, out = 0.0, []
    for i, (per, replicas) in enumerate(shapes):
        t += rng.expovariate(rate)
        out.append(Job(i + 1, t, rng.expovariate(1 / runtime), per, replicas))
    return out


@dataclass
class Result:
    gangs: int = 0
    in_rack: int = 0
    in_block: int = 0
    busy_gpu_seconds: float = 0.0
    span: float = 0.0
    gang_wait: float = 0.0
    other_wait: float = 0.0
    others: int = 0
    cpu_seconds: float = 0.0


def simulate(nodes: list[NodeSpec], stream: list[Job], policy: str) -> Result:
    cpu = time.process_time()
    where = {n.name: dict(n.topology) for n in nodes}  # the fleet's racks, whatever is shown
    if policy == "blind":
        nodes = [replace(n, topology=()) for n in nodes]
    pool = GpuPool(H100, "hub", nodes, FragModel(default_typical(), 1000))
    ask = TopologyAsk("rack", required=True) if policy == "aware, rack required" else None
    out = Result()
    ends: list[tuple[float, int]] = []
    held: dict[int, tuple[ReplicaPlacement, ...]] = {}
    waiting: list[Job] = []
    busy = 0
    last = 0.0
    last_arrival = stream[-1].arrival

    def advance(now: float) -> None:
        nonlocal last
        upto = min(now, last_arrival)
        if upto > last:
            out.busy_gpu_seconds += busy * (upto - last)
            last = upto

    def try_place(job: Job, now: float) -> bool:
        nonlocal busy
        demand = Demand(1000, job.gpus)
        if job.replicas > 1:
            placed = place_gang(pool, demand, job.replicas, ask)
        else:
            one = pool.place(demand)
            placed = (one,) if one is not None else None
        if placed is None:
            return False
        held[job.id] = placed
        busy += job.gpus * job.replicas
        heapq.heappush(ends, (now + job.runtime, job.id))
        wait = now - job.arrival
        if job.replicas > 1:
            out.gangs += 1
            out.gang_wait += wait
            racks = {where[r.node].get("rack") for r in placed}
            blocks = {where[r.node].get("block") for r in placed}
            out.in_rack += len(racks) == 1
            out.in_block += len(blocks) == 1
        else:
            out.others += 1
            out.other_wait += wait
        return True

    for job in stream:
        while ends and ends[0][0] <= job.arrival:
            now, job_id = heapq.heappop(ends)
            advance(now)
            for replica in held.pop(job_id):
                pool.release(replica, 0, 0)
                busy -= len(replica.gpus)
            waiting = [w for w in waiting if not try_place(w, now)]
        advance(job.arrival)
        if waiting or not try_place(job, job.arrival):
            waiting.append(job)
            waiting = [w for w in waiting if not try_place(w, job.arrival)]
    out.span = last_arrival - stream[0].arrival
    out.cpu_seconds = time.process_time() - cpu
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--racks", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--runtime", type=float, default=3600.0)
    parser.add_argument("--gang-share", type=float, default=0.3)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    nodes = fleet(args.blocks, args.racks, args.nodes)
    gpus = 8 * len(nodes)
    print(
        f"{len(nodes)} nodes × 8 GPUs in {args.blocks} blocks × {args.racks} racks; "
        f"{args.jobs} jobs, {args.gang_share:.0%} gangs, load {args.load}"
    )
    head = (
        "seed",
        "policy",
        "in rack",
        "in block",
        "alloc",
        "gang wait s",
        "other wait s",
        "CPU s",
    )
    widths = (4, 22, 8, 9, 6, 11, 12, 6)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for seed in range(1, args.seeds + 1):
        stream = jobs(
            args.jobs,
            gpus=gpus,
            load=args.load,
            runtime=args.runtime,
            gang_share=args.gang_share,
            seed=seed,
        )
        rows = {}
        for policy in POLICIES:
            r = simulate(nodes, stream, policy)
            rows[policy] = r
            print(
                f"{seed:>4} {policy:>22} {r.in_rack / max(1, r.gangs):>8.1%} "
                f"{r.in_block / max(1, r.gangs):>9.1%} "
                f"{r.busy_gpu_seconds / (gpus * r.span):>6.1%} "
                f"{r.gang_wait / max(1, r.gangs):>11.0f} {r.other_wait / max(1, r.others):>12.0f} "
                f"{r.cpu_seconds:>6.2f}"
            )
        aware, blind = rows["aware"], rows["blind"]
        share = (aware.in_rack / max(1, aware.gangs)) / max(
            1e-9, blind.in_rack / max(1, blind.gangs)
        )
        alloc = aware.busy_gpu_seconds / max(1e-9, blind.busy_gpu_seconds)
        print(f"{'':>4} {'aware ÷ blind':>22} {share:>7.2f}× {'':>9} {alloc:>5.3f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
