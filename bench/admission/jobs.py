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

# The newest Kueue release the Go module proxy serves that builds here (v0.19.3 and later, and
# v0.20.0, are answered "not available"; v0.17.0 was the earlier baseline): --kueue-version.
KUEUE_VERSION = "v0.19.2"


def kueue_cache(version: str = KUEUE_VERSION) -> Path:
    return Path.home() / ".cache" / "gpupaas" / "kueue" / version


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
    """The benchmark's own view of the cluster, the same for both systems: when each Job is
    first seen unsuspended (admitted) and when its pod is first seen Running."""

    def __init__(self, kube: Any, run: Run) -> None:
        from apps.orchestration.informer import Informer

        self.run = run
        self.stop = threading.Event()
        self.pods = Informer(kube, "v1", "Pod", label_selector=JOB_NAME, on_change=self._pods)
        self.informers = [
            self.pods,
            Informer(kube, "batch/v1", "Job", on_change=self._jobs),
        ]

    def _key(self, obj: dict[str, Any]) -> str:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return labels.get(WORKLOAD_LABEL) or labels.get(JOB_NAME) or ""

    def _pods(self, objects: list[dict[str, Any]], _relisted: bool) -> None:
        now = time.time()
        for pod in objects:
            if (pod.get("status") or {}).get("phase") == "Running":
                self.run.running.setdefault(self._key(pod), now)

    def _jobs(self, objects: list[dict[str, Any]], _relisted: bool) -> None:
        """A Job is admitted when it is first seen on the cluster not suspended: Kueue's when
        it unsuspends it, gpupaas' when it creates it (after admission, never suspended). The
        same watch times both systems."""
        now = time.time()
        for job in objects:
            if (job.get("spec") or {}).get("suspend") is False:
                key = self._key(job) or job["metadata"]["name"]
                self.run.admitted.setdefault(key, now)

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


def _proc_stat(pid: int) -> tuple[str, int, float] | None:
    """(name, parent, CPU seconds of its own: user + system) of a process, or None. Its ended
    children are sampled themselves, so what it waited for is left out (counted once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    fields = stat[stat.rindex(")") + 2 :].split()
    return (
        stat[stat.index("(") + 1 : stat.rindex(")")],
        int(fields[1]),
        sum(int(f) for f in fields[11:13]) / tick,
    )


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def machine_cpu_seconds() -> float:
    busy = Path("/proc/stat").read_text().split("\n")[0].split()[1:]
    idle = int(busy[3]) + int(busy[4])
    return (sum(int(f) for f in busy[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of the run's own processes only, per part: the simulated cluster (the
    kubesim process this run started and everything under it), Kueue's manager (started by
    the run), the gpupaas processes (the benchmark's children), the benchmark's own process
    (its submitting client and its watch, for either system), and PostgreSQL's server
    processes serving the run's database (by their process title), beside the whole machine.
    Processes are sampled every ``every`` seconds from start to stop, so one that ends
    between samples is counted up to its last sample; processes of other runs, other
    clusters and other databases are not counted at all."""

    def __init__(self, *, database: str, every: float = 0.5) -> None:
        self.database = database
        self.every = every
        self.roots: dict[int, str] = {}  # pid -> part, for the processes the run started
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.part_of: dict[int, str] = {}
        self.before: set[int] = set()  # processes there at the start (counted from then)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add_root(self, pid: int, part: str) -> None:
        self.roots[pid] = part

    def _sample(self) -> None:
        table: dict[int, tuple[str, int, float]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))) is not None:
                table[int(entry.name)] = stat
        me = os.getpid()
        for pid, (name, _parent, seconds) in table.items():
            part = self._part(pid, table, me)
            if part is None and name == "postgres" and f" {self.database} " in f"{_cmdline(pid)} ":
                part = "PostgreSQL (the run's database)"
            if part is None:
                continue
            self.part_of[pid] = part
            # One started since counts from its beginning, one there before from the start.
            self.first.setdefault(pid, seconds if pid in self.before else 0.0)
            self.last[pid] = seconds

    def _part(self, pid: int, table: dict[int, tuple[str, int, float]], me: int) -> str | None:
        seen, hops = pid, 0
        while seen > 1 and hops < 64:
            if seen in self.roots:
                return self.roots[seen]
            if seen == me:
                return "benchmark client" if pid == me else "gpupaas processes"
            seen, hops = table[seen][1] if seen in table else 1, hops + 1
        return None

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def start(self) -> None:
        self._machine_start = machine_cpu_seconds()
        self.before = {int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()}
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """The CPU seconds per part since :meth:`start` (and the whole machine's)."""
        self._sample()
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        totals: Counter[str] = Counter()
        for pid, seconds in self.last.items():
            # A process that existed before the start counts from its first sample.
            totals[self.part_of[pid]] += seconds - self.first.get(pid, 0.0)
        totals["machine"] = machine_cpu_seconds() - self._machine_start
        return dict(totals)
