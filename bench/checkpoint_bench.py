"""Checkpoint-aware preemption against newest-first, on the Alibaba GPU trace's runtimes.

The same jobs, arrivals and checkpoints are run twice through one event simulation; the only
difference is which legal victims a preemption takes:

* checkpoint-aware (gpupaas, ``apps.scheduling.preemption.cost_order``): lowest class first,
  then the fewest GPU-hours of work lost since each victim's last checkpoint, then newest;
* newest-first (the peers' rule: Kueue and KAI take the lowest priority, then the most
  recently admitted): lowest class first, then newest.

Both go through ``apps.scheduling.preemption.cheapest_set`` (victims added in that order until
the arrival fits, then the ones not needed spared), so the comparison is of the order alone.

Method. Jobs: the GPU pods of ``openb_pod_list_default.csv`` with a runtime (deletion −
scheduled time > 0), asking ``num_gpu × gpu_milli``; ``qos`` LS, Guaranteed and Burstable are
training, BE is batch (training preempts batch within a team, DESIGN.md). One team, one pool of
``--gpus`` GPUs in milli-GPU (nodes are not modelled: packing is another bench's subject).
Arrivals keep the trace's order and spacing, compressed so that the jobs' GPU-seconds are
``--load`` times what the pool serves over the arrival span. The trace has no checkpoints:
each job is given a checkpoint interval drawn with the seed from ``--intervals`` (minutes; 0
= never checkpoints), identical for both policies. A preempted job loses the work since its
last checkpoint of that run, goes back to the queue and later resumes from that checkpoint.
A job that cannot start queues (higher class first, then arrival); ends start what fits.

Printed per load and seed: GPU-hours of work lost, preemptions, jobs finished by the end,
and each policy's CPU seconds; then the ratio newest-first ÷ checkpoint-aware of lost work,
alone and with ``--restart-minutes`` of the victims' GPUs charged per preemption (starting
again is not free, and the two policies preempt different numbers of jobs).

    .venv/bin/python bench/checkpoint_bench.py [--data DIR] [--gpus 64] [--loads 1.2,1.5]
                                               [--seeds 3] [--intervals 0,5,10,20,30,60]
"""

from __future__ import annotations

import argparse
import csv
import heapq
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.scheduling.data import BATCH, TRAINING, RunningWorkload, priority_rank  # noqa: E402
from apps.scheduling.preemption import cheapest_set, cost_order, gpu_hours_lost  # noqa: E402
from apps.workloads.core import may_preempt  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "alibaba-gpu-v2023"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
Order = Callable[[Sequence[RunningWorkload], datetime], list[RunningWorkload]]


def newest_first(victims: Sequence[RunningWorkload], now: datetime) -> list[RunningWorkload]:
    """The peers' order: lowest class, then the most recently admitted."""
    return sorted(
        victims, key=lambda v: (-priority_rank(v.priority), -v.admitted_at.timestamp(), -v.id)
    )


POLICIES: dict[str, Order] = {"checkpoint-aware": cost_order, "newest-first": newest_first}


@dataclass(frozen=True)
class Job:
    id: int
    arrival: float  # seconds
    runtime: float  # seconds of work
    milli: int
    priority: str
    interval: float  # seconds between checkpoints; 0: never


@dataclass
class Outcome:
    lost_gpu_hours: float = 0.0
    preemptions: int = 0
    preempted_gpus: float = 0.0  # GPUs of every victim, summed over preemptions
    finished: int = 0
    last_end: float = 0.0  # seconds: when the last job ended
    cpu_seconds: float = 0.0


@dataclass
class _Run:
    job: Job
    started: float
    done_before: float  # seconds of work saved before this run started
    id: int = 0

    def saved_at(self, now: float) -> float:
        """Seconds of work saved by ``now``: what it resumed from plus this run's last
        checkpoint."""
        if not self.job.interval:
            return self.done_before
        ran = now - self.started
        return self.done_before + (ran // self.job.interval) * self.job.interval

    def last_checkpoint(self, now: float) -> float | None:
        if not self.job.interval:
            return None
        checkpoints = (now - self.started) // self.job.interval
        return self.started + checkpoints * self.job.interval if checkpoints else None


@dataclass(order=True)
class _Waiting:
    rank: int
    arrival: float
    job: Job = field(compare=False)
    done: float = field(compare=False, default=0.0)


def load_jobs(
    data: Path, *, gpus: int, load: float, intervals: Sequence[int], seed: int
) -> list[Job]:
    rows = list(csv.DictReader((data / "openb_pod_list_default.csv").open()))
    rng = random.Random(seed)  # noqa: S311 - a seeded simulation, not a secret
    raw = []
    for row in rows:
        num_gpu = int(row["num_gpu"] or 0)
        start = int(row["scheduled_time"] or row["creation_time"] or 0)
        runtime = int(row["deletion_time"] or 0) - start
        if num_gpu < 1 or runtime <= 0:
            continue
        milli = min(num_gpu * int(row["gpu_milli"] or 1000), gpus * 1000)
        priority = BATCH if row["qos"] == "BE" else TRAINING
        raw.append((int(row["creation_time"] or 0), runtime, milli, priority))
    raw.sort()
    span = max(1, raw[-1][0] - raw[0][0])
    work = sum(runtime * milli / 1000 for _, runtime, milli, _ in raw)
    # Compress the arrivals so the work is ``load`` × what the pool serves over the span.
    scale = work / (load * gpus * span)
    first = raw[0][0]
    return [
        Job(
            id=i + 1,
            arrival=(created - first) * scale,
            runtime=float(runtime),
            milli=milli,
            priority=priority,
            interval=60.0 * rng.choice(list(intervals)),
        )
        for i, (created, runtime, milli, priority) in enumerate(raw)
    ]


def simulate(jobs: Sequence[Job], *, gpus: int, order: Order) -> Outcome:
    """The event simulation: arrivals, ends, preemptions with ``order`` choosing victims."""
    cpu = time.process_time()
    capacity = gpus * 1000
    free = capacity
    running: dict[int, _Run] = {}
    ends: list[tuple[float, int, int]] = []  # (end time, run id, job id)
    waiting: list[_Waiting] = []
    out = Outcome()
    run_ids = iter(range(1, 10**9))
    arrivals = sorted(jobs, key=lambda j: (j.arrival, j.id))
    a = 0

    def start(job: Job, now: float, done: float) -> None:
        nonlocal free
        run = _Run(job, now, done, next(run_ids))
        running[job.id] = run
        free -= job.milli
        heapq.heappush(ends, (now + job.runtime - done, run.id, job.id))

    def as_running(run: _Run, now: float) -> RunningWorkload:
        at = run.last_checkpoint(now)
        return RunningWorkload(
            id=run.job.id,
            team="team",
            owner="owner",
            gpu_class="gpu",
            priority=run.job.priority,
            gpu_milli=run.job.milli,
            replicas=1,
            admitted_at=EPOCH + timedelta(seconds=run.started),
            placement=None,
            checkpoint_at=EPOCH + timedelta(seconds=at) if at is not None else None,
        )

    def try_start(now: float) -> None:
        nonlocal waiting
        kept: list[_Waiting] = []
        for item in sorted(waiting):
            if item.job.milli <= free:
                start(item.job, now, item.done)
            else:
                kept.append(item)
        waiting = kept

    def arrive(job: Job, now: float, done: float) -> None:
        nonlocal free
        if job.milli <= free and not any(w.rank <= -priority_rank(job.priority) for w in waiting):
            start(job, now, done)
            return
        candidates = [
            as_running(r, now)
            for r in running.values()
            if may_preempt(job.priority, r.job.priority)
        ]
        moment = EPOCH + timedelta(seconds=now)
        victims = cheapest_set(
            candidates,
            lambda chosen: free + sum(v.gpu_milli for v in chosen) >= job.milli,
            moment,
            order=order,
        )
        if victims is None:
            heapq.heappush(waiting, _Waiting(-priority_rank(job.priority), now, job, done))
            return
        for victim in victims:
            run = running.pop(victim.id)
            free += run.job.milli
            out.preemptions += 1
            out.preempted_gpus += run.job.milli / 1000
            out.lost_gpu_hours += gpu_hours_lost(victim, moment)
            saved = run.saved_at(now)
            waiting.append(
                _Waiting(-priority_rank(run.job.priority), run.job.arrival, run.job, saved)
            )
        start(job, now, done)

    while a < len(arrivals) or ends:
        next_arrival = arrivals[a].arrival if a < len(arrivals) else float("inf")
        if ends and ends[0][0] <= next_arrival:
            now, run_id, job_id = heapq.heappop(ends)
            run = running.get(job_id)
            if run is None or run.id != run_id:
                continue  # preempted before it ended
            del running[job_id]
            free += run.job.milli
            out.finished += 1
            out.last_end = now
            try_start(now)
        else:
            job = arrivals[a]
            a += 1
            arrive(job, job.arrival, 0.0)
    out.cpu_seconds = time.process_time() - cpu
    return out


def _ratio(theirs: float, ours: float) -> float:
    return theirs / ours if ours else float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("GPUPAAS_TRACE_DIR", DEFAULT_DATA))
    )
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--loads", default="1.2,1.5")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--intervals", default="0,5,10,20,30,60")
    parser.add_argument(
        "--restart-minutes",
        type=float,
        default=2.0,
        help="what each preemption costs its victim's GPUs to start again (load the "
        "checkpoint, warm up): printed as a second total beside the lost work",
    )
    args = parser.parse_args(argv)
    intervals = [int(x) for x in args.intervals.split(",")]
    print(
        f"{args.gpus} GPUs; checkpoint interval per job drawn from {intervals} min (0 = never); "
        "lost = GPU-hours of work since the victim's last checkpoint"
    )
    head = ("load", "seed", "policy", "lost GPU-h", "+restarts", "preemptions", "finished", "CPU s")
    widths = (5, 4, 17, 11, 10, 11, 8, 6)
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    ratios: list[float] = []
    totals: list[float] = []

    def with_restarts(r: Outcome) -> float:
        return r.lost_gpu_hours + r.preempted_gpus * args.restart_minutes / 60

    for load in (float(x) for x in args.loads.split(",")):
        for seed in range(1, args.seeds + 1):
            jobs = load_jobs(args.data, gpus=args.gpus, load=load, intervals=intervals, seed=seed)
            results = {
                name: simulate(jobs, gpus=args.gpus, order=order)
                for name, order in POLICIES.items()
            }
            for name, r in results.items():
                print(
                    f"{load:>5.2f} {seed:>4} {name:>17} {r.lost_gpu_hours:>11.1f} "
                    f"{with_restarts(r):>10.1f} {r.preemptions:>11} {r.finished:>8} "
                    f"{r.cpu_seconds:>6.2f}"
                )
            ours, theirs = results["checkpoint-aware"], results["newest-first"]
            ratio = _ratio(theirs.lost_gpu_hours, ours.lost_gpu_hours)
            both = _ratio(with_restarts(theirs), with_restarts(ours))
            ratios.append(ratio)
            totals.append(both)
            print(f"{'':>5} {'':>4} {'newest ÷ ours':>17} {ratio:>10.2f}× {both:>9.2f}×")
    low, high = min(ratios), max(ratios)
    print(f"lost work, newest-first ÷ checkpoint-aware: min {low:.2f}×, max {high:.2f}×")
    low, high = min(totals), max(totals)
    print(
        f"with {args.restart_minutes:g} min of restart per preemption: min {low:.2f}×, "
        f"max {high:.2f}×"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
