"""The endpoint scaling loop against an offered load: replicas over time, and what the
cool-downs buy, measured against baselines in the same run.

A simulated endpoint (pure Python, the loop's own decision core ``apps.serving.core``, no
Django): one pass every 30 s for 2 hours of offered load (a ramp, a plateau with noise, a
spike, a fall, then silence long enough to scale to zero). A replica serves at most
``--capacity`` requests/s and is ready ``--startup`` seconds after it is asked for (model
loading); a removed replica goes at once. The loop sees the rate the endpoint served in the
last pass (what Prometheus would report), as the real loop does.

Policies, all with min 0 (scale to zero after 10 idle minutes), max 8, target 10 req/s per
replica:
- ours: the loop as configured (scale-ups after 100 s, scale-downs after 300 s and only when
  the last 300 s asked for fewer);
- no cool-down: the same rule acting on every pass;
- fixed 8: the maximum all the time (no scaling).

    .venv/bin/python bench/serving_autoscale_bench.py [--seed 7] [--table]
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.serving import core

STEP = 30.0
HOURS = 2.0


def offered_load(seed: int) -> list[float]:
    """Requests/s offered at each pass."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible trace
    loads = []
    for i in range(int(HOURS * 3600 / STEP)):
        t = i * STEP / 60  # minutes
        if t < 5:
            base = 0.0
        elif t < 25:
            base = 4 * (t - 5)  # ramp to 80 req/s
        elif t < 55:
            base = 55.0
        elif t < 60:
            base = 75.0  # spike
        elif t < 80:
            base = 55 - 2.5 * (t - 60)  # fall to 5
        elif t < 95:
            base = 5.0
        else:
            base = 0.0  # silence: scale to zero after the idle period
        noise = rng.gauss(0, 0.12 * base) if base else 0.0
        loads.append(max(0.0, base + noise))
    return loads


@dataclass
class Outcome:
    name: str
    served: float = 0.0
    offered: float = 0.0
    replica_seconds: float = 0.0
    changes: int = 0
    overloaded_passes: int = 0
    rows: list[tuple[float, float, int, int, str]] | None = None


def run(
    name: str,
    policy: core.Policy | None,
    loads: list[float],
    capacity: float,
    startup: float,
    fixed: int = 0,
) -> Outcome:
    out = Outcome(name, rows=[])
    asked = fixed or 1
    starting: list[float] = []  # when each replica not yet ready was asked for
    ready = fixed or 1
    state = core.State(replicas=asked)
    served_rate = 0.0
    for i, offered in enumerate(loads):
        now = i * STEP
        # Replicas asked for earlier become ready after the startup time.
        done = [t for t in starting if now - t >= startup]
        starting = [t for t in starting if now - t < startup]
        ready += len(done)
        if policy is not None:
            d = core.decide(policy, state, core.Load(served_rate, served_rate), now)
            state = d.state
            if d.replicas != asked:
                out.changes += 1
                if d.replicas > asked:
                    starting += [now] * (d.replicas - asked)
                else:
                    drop = asked - d.replicas
                    waiting = min(drop, len(starting))
                    starting = starting[: len(starting) - waiting]
                    ready -= drop - waiting
                asked = d.replicas
            reason = d.reason
        else:
            reason = ""
        capacity_now = ready * capacity
        served_rate = min(offered, capacity_now)
        if offered > capacity_now + 1e-9:
            out.overloaded_passes += 1
        out.served += served_rate * STEP
        out.offered += offered * STEP
        out.replica_seconds += (ready + len(starting)) * STEP  # held GPUs, starting or not
        assert out.rows is not None
        out.rows.append((now / 60, offered, asked, ready, reason))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--capacity", type=float, default=12.0, help="req/s one replica serves")
    parser.add_argument("--startup", type=float, default=90.0, help="seconds to ready")
    parser.add_argument("--table", action="store_true", help="every pass, not every 4 minutes")
    args = parser.parse_args()
    loads = offered_load(args.seed)

    def policy(up: float, down: float) -> core.Policy:
        return core.Policy(
            min_replicas=0,
            max_replicas=8,
            metric="rps",
            target=10.0,
            idle_seconds=600,
            cooldown_up=up,
            cooldown_down=down,
        )

    ours = run("ours (cool-downs 100/300 s)", policy(100, 300), loads, args.capacity, args.startup)
    flappy = run("no cool-down", policy(0, 0), loads, args.capacity, args.startup)
    fixed = run("fixed at max (8)", None, loads, args.capacity, args.startup, fixed=8)

    print(
        f"Offered load and the loop's replicas (ours), one pass every {STEP:g} s, seed "
        f"{args.seed}; a replica serves {args.capacity:g} req/s, ready {args.startup:g} s after"
        " it is asked for.\n"
    )
    print(f"{'min':>5}  {'offered req/s':>13}  {'asked':>5}  {'ready':>5}  decision")
    assert ours.rows is not None
    every = 1 if args.table else int(240 / STEP)
    for i, (minute, offered, asked, ready, reason) in enumerate(ours.rows):
        if i % every == 0 or reason:
            bar = "#" * ready
            print(f"{minute:5.1f}  {offered:13.1f}  {asked:5d}  {ready:5d}  {bar:<8} {reason}")
    print()
    print(
        f"{'policy':<28} {'served':>8} {'GPU-hours':>10} {'changes':>8} {'overloaded passes':>18}"
    )
    for o in (ours, flappy, fixed):
        print(
            f"{o.name:<28} {o.served / o.offered:8.1%} {o.replica_seconds / 3600:10.2f} "
            f"{o.changes:8d} {o.overloaded_passes:18d}"
        )
    print()
    print(
        f"ours vs no cool-down: {flappy.changes / max(ours.changes, 1):.1f}× fewer replica "
        f"changes, served {ours.served / ours.offered:.1%} vs "
        f"{flappy.served / flappy.offered:.1%}"
    )
    print(
        f"ours vs fixed at max: {ours.replica_seconds / fixed.replica_seconds:.2f}× the "
        f"GPU-hours, served {ours.served / ours.offered:.1%} vs "
        f"{fixed.served / fixed.offered:.1%}"
    )


if __name__ == "__main__":
    main()
