"""Scale: one scheduling cycle with 10,000 waiting workloads, 1,000 nodes × 8 GPUs, 30 teams.

The fleet mixes the four sharing modes like the default topology (whole H100s, MIG and
HAMi A100s, time-sliced L40S); half of it is already held by running workloads; the
queue mixes fractions, whole GPUs, multi-GPU replicas and gangs in all four classes.
Timed: ``apps.scheduling.core.schedule`` on that snapshot (our cycle: fair share,
borrowing, preemption search, FGD placement, reasons, estimates, advice) and, in the
same run, a baseline cycle — FIFO order, quota check, first fit over the nodes.

    .venv/bin/python bench/scheduling_scale_bench.py [--waiting 10000] [--nodes 1000]

Fleet growth: ``--scales 1,3,10`` runs the cycle at each multiple of 1,000 nodes, 10,000
waiting workloads and 30 teams (10×: 10,000 nodes × 8 GPUs, 100,000 waiting, 300 teams), each
in a process of its own so that its peak memory is its own, and fits time and memory to
a·scaleᵏ (least squares on the logarithms). The FIFO baseline runs at 1× only (it is a
pass over the nodes for every waiting workload: 100× the work at 10×).

    .venv/bin/python bench/scheduling_scale_bench.py --scales 1,3,10
"""

from __future__ import annotations

import argparse
import json
import math
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.scheduling.core import schedule
from apps.scheduling.data import (
    GpuClassSpec,
    NodeSpec,
    Quota,
    RunningWorkload,
    Snapshot,
    WaitingWorkload,
)
from apps.scheduling.units import replica_demand

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CLASSES = (
    GpuClassSpec("H100-80GB", "whole", 81559),
    GpuClassSpec("A100-MIG", "mig", 81920, mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb")),
    GpuClassSpec("A100-HAMi", "hami", 81920, hami_split_count=10),
    GpuClassSpec("L40S-48GB", "timeslice", 46068, timeslice_replicas=4),
)
SHARE = {"H100-80GB": 0.6, "A100-MIG": 0.1, "A100-HAMi": 0.15, "L40S-48GB": 0.15}
SHAPES = {
    "H100-80GB": [(1000, 1), (2000, 1), (4000, 1), (8000, 1), (8000, 2), (8000, 4)],
    "A100-MIG": [(100, 1), (250, 1), (400, 1)],
    "A100-HAMi": [(100, 1), (250, 1), (500, 1), (1000, 1), (2000, 1)],
    "L40S-48GB": [(250, 1), (500, 1), (1000, 1)],
}
PRIORITIES = ("production", "training", "training", "development", "development", "batch")
LAYOUT = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")


def build(n_nodes: int, n_waiting: int, n_teams: int, seed: int) -> Snapshot:
    rng = random.Random(seed)  # noqa: S311 - reproducible workload, not a secret
    nodes: list[NodeSpec] = []
    for gpu_class in CLASSES:
        count = round(n_nodes * SHARE[gpu_class.name])
        for i in range(count):
            nodes.append(
                NodeSpec(
                    name=f"{gpu_class.name.lower()}-{i:04d}",
                    cluster="hub" if i % 4 else "spoke",
                    gpu_class=gpu_class.name,
                    gpu_count=8,
                    cpu_milli=192_000,
                    memory_mib=2_000_000,
                    mig_layout=LAYOUT if gpu_class.sharing_mode == "mig" else (),
                )
            )
    teams = [f"team-{i:02d}" for i in range(n_teams)]
    quotas = []
    for gpu_class in CLASSES:
        capacity = 1000 * 8 * sum(1 for n in nodes if n.gpu_class == gpu_class.name)
        guarantee = capacity // n_teams // 1000 * 1000
        for team in teams:
            quotas.append(Quota(team, gpu_class.name, guarantee, guarantee * 3, None))

    def request(i: int, gpu_class: GpuClassSpec) -> tuple[int, int]:
        return rng.choice(SHAPES[gpu_class.name])

    waiting = []
    for i in range(1, n_waiting + 1):
        gpu_class = rng.choices(CLASSES, weights=[SHARE[c.name] for c in CLASSES])[0]
        milli, replicas = request(i, gpu_class)
        waiting.append(
            WaitingWorkload(
                id=i,
                team=rng.choice(teams),
                owner=f"user{rng.randrange(300)}",
                gpu_class=gpu_class.name,
                priority=rng.choice(PRIORITIES),
                gpu_milli=milli,
                replicas=replicas,
                submitted_at=NOW - timedelta(seconds=rng.randrange(86_400)),
                cpu_milli=2000,
                memory_mib=8192,
                max_runtime_seconds=rng.choice([None, 3600, 4 * 3600, 24 * 3600]),
            )
        )
    # Fill half the fleet with running work: the admissions of an earlier cycle.
    earlier_queue = [
        WaitingWorkload(
            **{**w.__dict__, "id": 100_000 + w.id, "submitted_at": NOW - timedelta(days=1)}
        )
        for w in waiting[: n_waiting // 2]
    ]
    half_quotas = tuple(
        Quota(q.team, q.gpu_class, q.guaranteed_milli, q.guaranteed_milli * 3 // 2, None)
        for q in quotas
    )
    earlier = schedule(
        Snapshot(
            NOW - timedelta(hours=2), CLASSES, tuple(nodes), (), tuple(earlier_queue), half_quotas
        )
    )
    by_id = {w.id: w for w in earlier_queue}
    running = []
    for a in earlier.admissions:
        w = by_id[a.workload_id]
        running.append(
            RunningWorkload(
                id=w.id,
                team=w.team,
                owner=w.owner,
                gpu_class=w.gpu_class,
                priority=w.priority,
                gpu_milli=w.gpu_milli,
                replicas=w.replicas,
                admitted_at=NOW - timedelta(seconds=rng.randrange(60, 7200)),
                placement=a.placement,
                borrowed=a.borrowed,
                cpu_milli=w.cpu_milli,
                memory_mib=w.memory_mib,
                max_runtime_seconds=w.max_runtime_seconds,
            )
        )
    return Snapshot(NOW, CLASSES, tuple(nodes), tuple(running), tuple(waiting), tuple(quotas))


def baseline_cycle(snapshot: Snapshot) -> tuple[int, int]:
    """FIFO, quota check, first fit over nodes; per-GPU free milli. No reasons, no estimates."""
    classes = {c.name: c for c in snapshot.classes}
    free: dict[str, list[int]] = {n.name: [1000] * n.gpu_count for n in snapshot.nodes}
    by_class: dict[str, list[NodeSpec]] = defaultdict(list)
    for n in snapshot.nodes:
        by_class[n.gpu_class].append(n)
    usage: dict[tuple[str, str], int] = defaultdict(int)
    for r in snapshot.running:
        usage[(r.team, r.gpu_class)] += r.total_milli
        if r.placement:
            for rp in r.placement.replicas:
                for g in rp.gpus:
                    free[rp.node][g] -= min(1000, r.gpu_milli)
    limits = {(q.team, q.gpu_class): q.limit_milli for q in snapshot.quotas}
    admitted = admitted_milli = 0
    for w in sorted(snapshot.waiting, key=lambda w: (w.submitted_at, w.id)):
        key = (w.team, w.gpu_class)
        if usage[key] + w.total_milli > limits.get(key, 0):
            continue
        demand = replica_demand(classes[w.gpu_class], w.gpu_milli)
        per_gpu = min(1000, w.gpu_milli)
        taken: list[tuple[str, list[int]]] = []
        for _ in range(w.replicas):
            for node in by_class[w.gpu_class]:
                gpus = [g for g, f in enumerate(free[node.name]) if f >= per_gpu]
                if len(gpus) >= demand.gpus:
                    chosen = gpus[: demand.gpus]
                    for g in chosen:
                        free[node.name][g] -= per_gpu
                    taken.append((node.name, chosen))
                    break
            else:
                for name, chosen in taken:
                    for g in chosen:
                        free[name][g] += per_gpu
                taken = []
                break
        if taken:
            usage[key] += w.total_milli
            admitted += 1
            admitted_milli += w.total_milli
    return admitted, admitted_milli


def rss_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_scale(args: argparse.Namespace) -> dict[str, float | str]:
    """One scale, in this process: build the snapshot, time the cycle, report memory."""
    before = rss_mib()
    started = time.perf_counter()
    snapshot = build(args.nodes, args.waiting, args.teams, args.seed)
    built_s = time.perf_counter() - started
    after_build = rss_mib()
    times, cpus = [], []
    result = None
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = schedule(snapshot)
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    assert result is not None
    row: dict[str, float | str] = {
        "nodes": args.nodes,
        "waiting": len(snapshot.waiting),
        "running": len(snapshot.running),
        "teams": args.teams,
        "gpus": sum(n.gpu_count for n in snapshot.nodes),
        "cycle_s": statistics.median(times),
        "cpu_s": statistics.median(cpus),
        "admitted": len(result.admissions),
        "build_s": built_s,
        "snapshot_mib": after_build - before,
        "peak_mib": rss_mib(),
        "cycle_mib": rss_mib() - after_build,
    }
    # The decisions in full (admissions with placements and reasons, preemptions, every
    # waiting workload's position, reason and estimate): equal digests, equal decisions.
    # Worked out after the memory figures, which its text (and hashlib's import) would swell.
    import hashlib

    row["digest"] = hashlib.sha256(repr(result).encode()).hexdigest()[:16]
    return row


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """y = a·x^k by least squares on the logarithms: (a, k)."""
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-9)) for y in ys]
    mx, my = statistics.mean(lx), statistics.mean(ly)
    k = sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum(
        (a - mx) ** 2 for a in lx
    )
    return math.exp(my - k * mx), k


def scales(args: argparse.Namespace) -> int:
    rows = []
    for scale in [float(x) for x in args.scales.split(",")]:
        command = [
            sys.executable, __file__, "--json",
            "--nodes", str(round(1_000 * scale)),
            "--waiting", str(round(10_000 * scale)),
            "--teams", str(round(30 * scale)),
            "--repeat", str(args.repeat if scale <= 1 else 1),
            "--seed", str(args.seed),
        ]  # fmt: skip
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        row["scale"] = scale
        rows.append(row)
        print(
            f"{scale:g}x: {row['nodes']} nodes ({row['gpus']} GPUs), {row['waiting']} waiting,"
            f" {row['running']} running, {row['teams']} teams: cycle {row['cycle_s']:.2f} s"
            f" (CPU {row['cpu_s']:.2f} s), {row['admitted']} admitted (digest {row['digest']});"
            f" memory: snapshot"
            f" {row['snapshot_mib']:.0f} MiB, cycle +{row['cycle_mib']:.0f} MiB, peak"
            f" {row['peak_mib']:.0f} MiB",
            flush=True,
        )
    if len(rows) >= 2:
        xs = [r["scale"] for r in rows]
        for key, label in (
            ("cycle_s", "cycle time (wall)"),
            ("cpu_s", "cycle CPU time"),
            ("peak_mib", "peak memory"),
        ):
            a, k = fit(xs, [r[key] for r in rows])
            print(f"{label} ≈ {a:.3g} × scale^{k:.2f}")
        largest = rows[-1]
        print(
            f"largest: cycle CPU {largest['cpu_s']:.2f} s (wall {largest['cycle_s']:.2f} s) against"
            f" the 5 s goal for CPU time: {'met' if largest['cpu_s'] < 5 else 'NOT met'}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--teams", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scales", help="multiples of the default fleet, e.g. 1,3,10")
    parser.add_argument("--json", action="store_true", help="one scale, as JSON (no baseline)")
    args = parser.parse_args(argv)
    if args.scales:
        return scales(args)
    if args.json:
        print(json.dumps(one_scale(args)))
        return 0
    snapshot = build(args.nodes, args.waiting, args.teams, args.seed)
    gpus = sum(n.gpu_count for n in snapshot.nodes)
    ours: list[float] = []
    ours_cpu: list[float] = []
    base: list[float] = []
    result = None
    base_result = (0, 0)
    for _ in range(args.repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = schedule(snapshot)
        ours.append(time.perf_counter() - started)
        ours_cpu.append(time.process_time() - cpu)
        started = time.perf_counter()
        base_result = baseline_cycle(snapshot)
        base.append(time.perf_counter() - started)
    assert result is not None
    admitted_milli = sum(
        w.total_milli
        for w in snapshot.waiting
        if w.id in {a.workload_id for a in result.admissions}
    )
    print(
        f"one cycle: {len(snapshot.waiting)} waiting, {len(snapshot.running)} running, "
        f"{len(snapshot.nodes)} nodes × 8 = {gpus} GPUs, {args.teams} teams"
    )
    print(f"{'cycle':<34} {'median s':>9} {'admitted':>9} {'admitted GPU':>13}")
    print(
        f"{'ours (full cycle)':<34} {statistics.median(ours):>9.3f} "
        f"{len(result.admissions):>9} {admitted_milli / 1000:>13.1f}"
    )
    print(
        f"{'baseline (FIFO first fit, no why)':<34} {statistics.median(base):>9.3f} "
        f"{base_result[0]:>9} {base_result[1] / 1000:>13.1f}"
    )
    print(
        f"ours: {len(result.preemptions)} preemptions, {len(result.waiting)} waiting with reasons "
        f"({sum(1 for w in result.waiting if w.estimated_start)} with an estimate), "
        f"{len(result.rejections)} rejected; CPU time of our cycle "
        f"{statistics.median(ours_cpu):.3f} s; time ratio ours ÷ baseline "
        f"{statistics.median(ours) / statistics.median(base):.2f}; target < 1 s: "
        f"{'met' if statistics.median(ours) < 1 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
