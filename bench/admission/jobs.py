"""What both systems get and how a run is measured: the Jobs (shapes, teams, classes), the
simulated cluster's topology, a run's timings, and the pod watch that sees Jobs' pods Running."""

from __future__ import annotations

import os
import random
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KUEUE_VERSION = "v0.17.0"
KUEUE_CACHE = Path.home() / ".cache" / "gpupaas" / "kueue" / KUEUE_VERSION
DB_NAME = "gpupaas_bench_admission"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
CLASSES = ("production", "training", "development", "batch")
CLASS_VALUE = {"production": 4000, "training": 3000, "development": 2000, "batch": 1000}
SHAPES = ((1, 0.5), (2, 0.25), (4, 0.15), (8, 0.10))  # GPUs per Job, share
SUBMITTERS = 8
JOB_NAME = "batch.kubernetes.io/job-name"
WORKLOAD_LABEL = "gpupaas.io/workload-id"


@dataclass(frozen=True)
class JobSpec:
    index: int
    team: int
    gpus: int
    priority: str


def make_jobs(n: int, teams: int, seed: int = 7) -> list[JobSpec]:
    rng = random.Random(seed)  # noqa: S311 - a reproducible mix, not security
    shapes = [g for g, _ in SHAPES]
    weights = [w for _, w in SHAPES]
    return [
        JobSpec(i, rng.randrange(teams), rng.choices(shapes, weights)[0], rng.choice(CLASSES))
        for i in range(n)
    ]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def topology(nodes: int) -> str:
    return f"""pools:
  - name: h100
    count: {nodes}
    cpu: "192"
    memory: 2Ti
    instanceType: gpu-h100-8x
    gpu:
      count: 8
      product: {PRODUCT}
      memoryMiB: 81559
      family: hopper
      computeCapability: "9.0"
      driverVersion: "570.133.20"
      cudaVersion: "12.8"
      sharing:
        mode: whole
"""


@dataclass
class Run:
    system: str
    submitted: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    klass: dict[str, str] = field(default_factory=dict)
    team: dict[str, int] = field(default_factory=dict)
    gpus: dict[str, int] = field(default_factory=dict)
    submit_done: float = 0.0
    allocation: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # gpupaas only: where the time goes (stage -> seconds per workload), and the loops' costs
    stages: dict[str, list[float]] = field(default_factory=dict)
    capacity: int = 0
    run_seconds: int = 0
    loops: dict[str, list[float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per part (cpu_seconds)
    requests: Counter[str] = field(default_factory=Counter)  # API server requests per verb

    def report(self) -> dict[str, Any]:
        first = min(self.submitted.values()) if self.submitted else 0.0
        last_admit = max(self.admitted.values()) if self.admitted else first
        to_admit = [self.admitted[k] - self.submitted[k] for k in self.admitted]
        to_run = [self.running[k] - self.submitted[k] for k in self.running]
        return {
            "system": self.system,
            "submitted": len(self.submitted),
            "submit_rate": len(self.submitted) / max(1e-9, self.submit_done - first),
            "admitted": len(self.admitted),
            "running": len(self.running),
            "adm_rate": len(self.admitted) / max(1e-9, last_admit - first),
            "adm_p50": statistics.median(to_admit) if to_admit else float("nan"),
            "adm_p99": pct(to_admit, 0.99),
            "run_p50": statistics.median(to_run) if to_run else float("nan"),
            "run_p99": pct(to_run, 0.99),
            "busy": self.busy(),
        }

    def busy(self) -> float:
        """GPUs in use on average, as a share of the fleet, from the first submit until the
        last admission (each pod runs from first seen Running for ``run_seconds``)."""
        if not self.running or not self.capacity or not self.admitted:
            return float("nan")
        first = min(self.submitted.values())
        last = max(self.admitted.values())
        used = sum(
            self.gpus[k] * max(0.0, min(t + self.run_seconds, last) - max(t, first))
            for k, t in self.running.items()
            if k in self.gpus
        )
        return used / (self.capacity * max(1e-9, last - first))


class PodWatch:
    """The benchmark's own view of the cluster: when each Job's pod is first seen Running,
    and (for Kueue) when each Job is first seen unsuspended."""

    def __init__(self, kube: Any, run: Run, *, jobs: bool) -> None:
        from apps.orchestration.informer import Informer

        self.run = run
        self.stop = threading.Event()
        self.pods = Informer(kube, "v1", "Pod", label_selector=JOB_NAME, on_change=self._pods)
        self.informers = [self.pods]
        if jobs:
            self.informers.append(Informer(kube, "batch/v1", "Job", on_change=self._jobs))

    def _key(self, obj: dict[str, Any]) -> str:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return labels.get(WORKLOAD_LABEL) or labels.get(JOB_NAME) or ""

    def _pods(self, objects: list[dict[str, Any]], _relisted: bool) -> None:
        now = time.time()
        for pod in objects:
            if (pod.get("status") or {}).get("phase") == "Running":
                self.run.running.setdefault(self._key(pod), now)

    def _jobs(self, objects: list[dict[str, Any]], _relisted: bool) -> None:
        now = time.time()
        for job in objects:
            if (job.get("spec") or {}).get("suspend") is False:
                self.run.admitted.setdefault(job["metadata"]["name"], now)

    def start(self) -> None:
        for informer in self.informers:
            informer.start(self.stop)
        for informer in self.informers:
            informer.synced.wait(60)

    def allocation(self) -> dict[str, Any]:
        """GPUs of running pods, per team and per class."""
        per_team: Counter[int] = Counter()
        per_class: Counter[str] = Counter()
        for pod in self.pods.objects():
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            key = self._key(pod)
            if key not in self.run.gpus:
                continue
            per_team[self.run.team[key]] += self.run.gpus[key]
            per_class[self.run.klass[key]] += self.run.gpus[key]
        return {"team": per_team, "class": per_class}


def wait_done(run: Run, total: int, *, stall: float = 90.0, deadline: float = 3600.0) -> None:
    start = time.time()
    seen, progress = -1, time.time()
    while len(run.running) < total and time.time() - start < deadline:
        if len(run.running) != seen:
            seen, progress = len(run.running), time.time()
        elif time.time() - progress > stall:
            run.notes.append(f"stopped waiting: nothing new running for {stall:.0f} s")
            return
        time.sleep(0.5)


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far, per part of the machine: the simulated cluster (kubesim and the
    control plane it runs), PostgreSQL, Kueue's manager, this benchmark with the gpupaas
    processes it started (ended children included), and the whole machine."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    name: dict[int, str] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        name[pid] = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parent[pid] = int(fields[1])
        # utime, stime and the same for children it has waited for (ended processes)
        used[pid] = sum(int(f) for f in fields[11:15]) / tick

    def part(pid: int) -> str:
        seen = pid
        while seen > 1:
            if name.get(seen) == "kubesim":
                return "cluster (kubesim)"
            if name.get(seen) == "kueue":
                return "Kueue manager"
            if name.get(seen) == "postgres" and name.get(parent.get(seen, 1)) != "postgres":
                return "PostgreSQL"
            if seen == os.getpid():
                return "benchmark + gpupaas"
            seen = parent.get(seen, 1)
        return "other"

    totals: Counter[str] = Counter()
    for pid, seconds in used.items():
        totals[part(pid)] += seconds
    busy = Path("/proc/stat").read_text().split("\n")[0].split()[1:]
    idle = int(busy[3]) + int(busy[4])
    totals["machine"] = (sum(int(f) for f in busy[:8]) - idle) / tick
    return dict(totals)
