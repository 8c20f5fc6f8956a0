"""End-to-end admission beside Kueue: the same Jobs, the same quotas, the same simulated cluster.

Each system in turn gets a fresh kubesim (``--nodes`` H100 nodes of 8 GPUs) and the same
``--jobs`` Jobs (mixed shapes: 1, 2, 4 and 8 GPUs; ``--teams`` teams; the four priority
classes; each pod runs ``--run-seconds``), submitted by 8 client threads as fast as the
system takes them:

* gpupaas, one process per part as deployed: web workers calling ``workload_submit`` (the
  request rules, PostgreSQL), a scheduling worker running the cycle back to back (as a busy
  worker runs one for all submits that arrived meanwhile), a reconcile worker whose 8
  threads run ``workload_reconcile`` for each admitted workload (as the Celery workers do),
  the watch (``ClusterWatch``) turning pod and Job changes into states, which frees quota
  for the next cycle;
* Kueue v0.17.0 (built with ``go install``, cached under ~/.cache/gpupaas/kueue): its CRDs,
  a ResourceFlavor for the H100 nodes, a ClusterQueue per team (nominal quota = the team's
  guarantee, borrowing limit = limit − guarantee, one cohort), a LocalQueue per team
  namespace, four WorkloadPriorityClasses; Jobs created suspended with the queue label.

Per system: admissions per second (admitted ÷ time from the first submit to the last
admission), submit → admitted and submit → running p50 / p99 (running = the first time the
benchmark's own pod watch sees the Job's pod Running), and the allocation while the cluster
is full (GPUs of running pods per team and class when the last Job has been submitted).

Run: .venv/bin/python bench/admission_bench.py [--jobs 15000] [--teams 30] [--nodes 64]
                                               [--run-seconds 30] [--only gpupaas|kueue]
                                               [--web-processes 2]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
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


# --- gpupaas ---------------------------------------------------------------------------------


@dataclass
class Parts:
    """What the gpupaas processes share: the cluster, the teams, and the queues between them."""

    cluster_id: int
    team_ids: list[int]
    owner_ids: list[int]
    gpu_class_id: int
    image_id: int
    run_seconds: int
    stop: Any  # multiprocessing.Event: the run is over
    go: Any  # multiprocessing.Event: the benchmark's own watch is synced, submit
    admitted: Any  # multiprocessing.Queue of workload ids, cycle -> reconcile workers
    results: Any  # multiprocessing.Queue of (part, payload), each part -> the benchmark


def _part_scheduler(parts: Parts) -> None:
    """The scheduling worker: cycles back to back while they admit (as a busy worker runs one
    for every submit that arrived meanwhile), every 0.2 s otherwise."""
    from django.db import connection

    from apps.scheduling.services import scheduling_cycle_run

    seconds: list[float] = []
    profile = cProfile.Profile() if os.environ.get("ADMISSION_PROFILE") else None
    while not parts.stop.is_set():
        t0 = time.perf_counter()
        if profile is not None:
            profile.enable()
        result = scheduling_cycle_run()
        if profile is not None:
            profile.disable()
        seconds.append(time.perf_counter() - t0)
        for pk in result.admitted:
            parts.admitted.put(pk)
        if not result.admitted:
            parts.stop.wait(0.2)
    connection.close()
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
    parts.results.put(("cycle", seconds))


def _part_reconcilers(parts: Parts) -> None:
    """The reconcile workers: ``workload_reconcile`` for each admitted workload, 8 at a time
    (8 Celery worker threads, each keeping its connection as a worker does)."""
    import queue as queues

    from django.db import connection

    from apps.orchestration import services

    notes: list[str] = []

    def reconcile(pk: int) -> None:
        try:
            services.workload_reconcile(workload_id=pk)
        except Exception as exc:  # a worker's task retries; the bench records it
            notes.append(f"reconcile {pk}: {exc}")
            connection.close()

    with ThreadPoolExecutor(8, thread_name_prefix="reconcile") as pool:
        while not parts.stop.is_set():
            try:
                pk = parts.admitted.get(timeout=0.2)
            except queues.Empty:
                continue
            pool.submit(reconcile, pk)
    parts.results.put(("notes", notes))


def _part_watch(parts: Parts) -> None:
    """``manage.py watch_clusters``: the watch loop turning pod and Job changes into states."""
    from django.db import connection

    from apps.catalog.models import Cluster
    from apps.orchestration.watch import ClusterWatch

    seconds: list[float] = []
    watch = ClusterWatch(Cluster.objects.get(pk=parts.cluster_id))
    watch.start()
    try:
        while not parts.stop.is_set():
            t0 = time.perf_counter()
            if watch.step(timeout=0.5).workloads:
                seconds.append(time.perf_counter() - t0)
    finally:
        watch.stop()
        connection.close()
    parts.results.put(("watch step", seconds))


def _part_submitter(parts: Parts, jobs: list[JobSpec], threads: int) -> None:
    """A web worker: ``workload_submit`` for its share of the Jobs, ``threads`` at a time."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from apps.accounts.models import Team
    from apps.catalog.models import GpuClass, Image
    from apps.workloads import core as wl
    from apps.workloads.services import workload_submit

    teams = Team.objects.in_bulk(parts.team_ids)
    owners = get_user_model().objects.in_bulk(parts.owner_ids)
    gpu_class = GpuClass.objects.get(pk=parts.gpu_class_id)
    image = Image.objects.get(pk=parts.image_id)
    annotations = {"kubesim.io/run-duration": f"{parts.run_seconds}s"}
    connection.close()
    done: list[tuple[str, float, int]] = []
    notes: list[str] = []

    def submit(spec: JobSpec) -> None:
        t0 = time.time()
        try:
            workload = workload_submit(
                actor=owners[parts.owner_ids[spec.team]],
                team=teams[parts.team_ids[spec.team]],
                kind=wl.KIND_TRAINING,
                name=f"job-{spec.index}",
                gpu_class=gpu_class,
                image=image,
                gpu_milli=spec.gpus * 1000,
                priority_class=spec.priority,
                command=["python", "train.py"],
                params={"pod_annotations": annotations},
            )
        except Exception as exc:
            notes.append(f"submit {spec.index}: {exc}")
            connection.close()
            return
        done.append((str(workload.pk), t0, spec.index))

    parts.go.wait()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(submit, jobs))
    parts.results.put(("submitted", done))
    parts.results.put(("notes", notes))


def run_gpupaas(args: argparse.Namespace, jobs: list[JobSpec], kubesim: Any) -> Run:
    """gpupaas as it is deployed: web workers (``--web-processes`` processes sharing the 8
    submitting threads), a scheduling worker, a reconcile worker with 8 threads and the
    watch, each a process of its own; the benchmark's own pod watch in this one."""
    import multiprocessing

    from django.core.management import call_command
    from django.db import connections

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.orchestration.clusters import forget_clients, kube_for
    from apps.workloads import core as wl
    from apps.workloads.models import WorkloadEvent
    from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, UserFactory

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    run = Run("gpupaas", capacity=args.nodes * 8, run_seconds=args.run_seconds)
    cluster = Cluster.objects.create(name="bench", kubeconfig_path=str(kubesim.kubeconfig))
    services.cluster_inventory_sync(cluster=cluster)
    h100 = GpuClass.objects.get(product_label=PRODUCT, sharing_mode="whole")
    image = Image.objects.get(name="PyTorch training")
    teams, owners = [], []
    for t in range(args.teams):
        team = TeamFactory(name=f"Team {t}")
        TeamQuotaFactory(
            team=team,
            gpu_class=h100,
            guaranteed_milli=args.guarantee * 1000,
            limit_milli=args.limit * 1000,
        )
        owner = UserFactory(username=f"lead{t}")
        MembershipFactory(user=owner, team=team, role="lead")
        teams.append(team)
        owners.append(owner)
    for team in teams:
        services.team_namespace_ensure(team=team)
    # No connection, socket or thread crosses the fork below: each process opens its own.
    connections.close_all()
    forget_clients()
    gc.collect()
    context = multiprocessing.get_context("fork")
    parts = Parts(
        cluster_id=cluster.pk,
        team_ids=[t.pk for t in teams],
        owner_ids=[o.pk for o in owners],
        gpu_class_id=h100.pk,
        image_id=image.pk,
        run_seconds=args.run_seconds,
        stop=context.Event(),
        go=context.Event(),
        admitted=context.Queue(),
        results=context.Queue(),
    )
    web = max(1, args.web_processes)
    processes = [
        context.Process(target=_part_scheduler, args=(parts,), name="scheduler"),
        context.Process(target=_part_reconcilers, args=(parts,), name="reconcile"),
        context.Process(target=_part_watch, args=(parts,), name="watch"),
        *(
            context.Process(
                target=_part_submitter,
                args=(parts, jobs[i::web], max(1, SUBMITTERS // web)),
                name=f"web-{i}",
            )
            for i in range(web)
        ),
    ]
    for process in processes:
        process.start()
    view = PodWatch(kube_for(cluster), run, jobs=False)
    view.start()
    by_index = {spec.index: spec for spec in jobs}
    collected: dict[str, list[Any]] = {}
    expected = 3 + 2 * web  # cycle, notes, watch step; submitted and notes per web worker

    def take(count: int) -> None:
        for _ in range(count):
            part, payload = parts.results.get(timeout=3 * 3600)  # a lost part stops the run
            collected.setdefault(part, []).extend(payload)

    parts.go.set()
    take(2 * web)  # every web worker has submitted its share
    run.submit_done = time.time()
    for key, t0, index in collected.pop("submitted", []):
        spec = by_index[index]
        run.submitted[key] = t0
        run.klass[key], run.team[key], run.gpus[key] = spec.priority, spec.team, spec.gpus
    run.allocation = view.allocation()
    wait_done(run, len(run.submitted))
    run.cpu = cpu_seconds()
    parts.stop.set()
    take(expected - 2 * web)
    for process in processes:
        process.join(timeout=120)
    view.stop.set()
    run.notes.extend(collected.pop("notes", []))
    events = WorkloadEvent.objects.filter(to_state=wl.ADMITTED).values_list(
        "workload_id", "created_at"
    )
    for pk, at in events:
        run.admitted.setdefault(str(pk), at.timestamp())
    run.loops = {name: collected.get(name, []) for name in ("cycle", "watch step")}
    run.stages = stage_breakdown(run, args.run_seconds)
    return run


def stage_breakdown(run: Run, run_seconds: int) -> dict[str, list[float]]:
    """Seconds per workload in each stage of gpupaas' pipeline, from its state events and
    the benchmark's own pod watch."""
    from apps.workloads.models import Workload, WorkloadEvent

    created = dict(Workload.objects.values_list("pk", "created_at"))
    first: dict[tuple[int, str], float] = {}
    for pk, state, at in WorkloadEvent.objects.order_by("created_at", "id").values_list(
        "workload_id", "to_state", "created_at"
    ):
        first.setdefault((pk, state), at.timestamp())
    stages: dict[str, list[float]] = {}

    def add(name: str, a: float | None, b: float | None) -> None:
        if a is not None and b is not None:
            stages.setdefault(name, []).append(b - a)

    for key, t_submit in run.submitted.items():
        pk = int(key)
        row = created[pk].timestamp() if pk in created else None
        admitted = first.get((pk, "admitted"))
        starting = first.get((pk, "starting"))
        pod_running = run.running.get(key)
        running = first.get((pk, "running"))
        done = first.get((pk, "succeeded"))
        add("submit → row", t_submit, row)
        add("row → admitted (queue + cycle)", row, admitted)
        add("admitted → Job created (reconcile)", admitted, starting)
        add("Job created → pod Running (cluster)", starting, pod_running)
        add("pod Running → state running (watch)", pod_running, running)
        add(
            "pod finished → state succeeded (watch)",
            pod_running + run_seconds if pod_running is not None else None,
            done,
        )
    # How long freed quota stays unused: from each workload's end to the next admission.
    ends = sorted(t for (_, state), t in first.items() if state == "succeeded")
    admits = sorted(t for (_, state), t in first.items() if state == "admitted")
    j = 0
    for end in ends:
        while j < len(admits) and admits[j] < end:
            j += 1
        if j < len(admits):
            stages.setdefault("succeeded → next admission", []).append(admits[j] - end)
    return stages


# --- Kueue -----------------------------------------------------------------------------------


def kueue_binary() -> Path:
    binary = KUEUE_CACHE / "kueue"
    if not binary.exists():
        KUEUE_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "install", f"sigs.k8s.io/kueue/cmd/kueue@{KUEUE_VERSION}"],
            check=True,
            env={**os.environ, "GOBIN": str(KUEUE_CACHE), "GOTOOLCHAIN": "local"},
        )
    return binary


def kueue_crds() -> list[dict[str, Any]]:
    import yaml

    modcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True
    ).stdout.strip()
    base = Path(modcache) / f"sigs.k8s.io/kueue@{KUEUE_VERSION}/config/components/crd/bases"
    crds = []
    for path in sorted(base.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["spec"].pop("conversion", None)  # its webhook Service exists only in a cluster
        crds.append(crd)
    return crds


CERT_DIRS = (Path("/etc/kueue/metrics/certs"), Path("/visibility"))


@contextmanager
def kueue_running(kubeconfig: Path, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    certs = workdir / "certs"
    certs.mkdir()
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost",
            "-keyout", str(certs / "tls.key"), "-out", str(certs / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    made = []
    for directory in CERT_DIRS:
        if not directory.exists():
            # the outermost folder we create, so that removing it leaves nothing behind
            top = directory
            while not top.parent.exists():
                top = top.parent
            directory.mkdir(parents=True)
            made.append(top)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(certs / name, directory / name)
    config = workdir / "kueue.yaml"
    config.write_text(
        f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {{healthProbeBindAddress: 127.0.0.1:18081}}
metrics: {{bindAddress: "0"}}
webhook: {{port: 19443, host: 127.0.0.1, certDir: {certs}}}
leaderElection: {{leaderElect: false}}
internalCertManagement: {{enable: false}}
integrations: {{frameworks: ["batch/job"]}}
clientConnection: {{qps: 500, burst: 1000}}
"""
    )
    log = (workdir / "kueue.log").open("wb")
    proc = subprocess.Popen(
        [str(kueue_binary()), f"--config={config}", f"--kubeconfig={kubeconfig}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                tail = (workdir / "kueue.log").read_text()[-3000:]
                raise RuntimeError(f"kueue exited with {proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen("http://127.0.0.1:18081/readyz", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("kueue not ready after 120 s")
            time.sleep(1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        for directory in CERT_DIRS:
            for name in ("tls.crt", "tls.key"):
                (directory / name).unlink(missing_ok=True)
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)


def run_kueue(args: argparse.Namespace, jobs: list[JobSpec], kubesim: Any, workdir: Path) -> Run:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from apps.orchestration.kube import Kube

    run = Run("kueue", capacity=args.nodes * 8, run_seconds=args.run_seconds)
    api = k8s_config.new_client_from_config(config_file=str(kubesim.kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    core = k8s.CoreV1Api(api)
    ext = k8s.ApiextensionsV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    batch = k8s.BatchV1Api(api)
    for crd in kueue_crds():
        ext.create_custom_resource_definition(crd)
    for crd in kueue_crds():
        name = crd["metadata"]["name"]
        for _ in range(120):
            status = ext.read_custom_resource_definition(name).status
            if any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
                break
            time.sleep(0.5)
    core.create_namespace({"metadata": {"name": "kueue-system"}})
    namespaces = [f"team-{t}" for t in range(args.teams)]
    for ns in namespaces:
        core.create_namespace({"metadata": {"name": ns}})
    group, version = "kueue.x-k8s.io", "v1beta2"
    with kueue_running(kubesim.kubeconfig, workdir):
        custom.create_cluster_custom_object(
            group, version, "resourceflavors",
            {
                "apiVersion": f"{group}/{version}", "kind": "ResourceFlavor",
                "metadata": {"name": "h100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": PRODUCT}},
            },
        )  # fmt: skip
        for name, value in CLASS_VALUE.items():
            custom.create_cluster_custom_object(
                group, version, "workloadpriorityclasses",
                {
                    "apiVersion": f"{group}/{version}", "kind": "WorkloadPriorityClass",
                    "metadata": {"name": name}, "value": value,
                },
            )  # fmt: skip
        for t, ns in enumerate(namespaces):
            custom.create_cluster_custom_object(
                group, version, "clusterqueues",
                {
                    "apiVersion": f"{group}/{version}", "kind": "ClusterQueue",
                    "metadata": {"name": f"cq-{t}"},
                    "spec": {
                        "cohortName": "gpupaas",
                        "namespaceSelector": {},
                        "preemption": {
                            "withinClusterQueue": "LowerPriority",
                            "reclaimWithinCohort": "Any",
                        },
                        "resourceGroups": [{
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [{
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100000"},
                                    {"name": "memory", "nominalQuota": "100000Gi"},
                                    {
                                        "name": "nvidia.com/gpu",
                                        "nominalQuota": str(args.guarantee),
                                        "borrowingLimit": str(args.limit - args.guarantee),
                                    },
                                ],
                            }],
                        }],
                    },
                },
            )  # fmt: skip
            custom.create_namespaced_custom_object(
                group, version, ns, "localqueues",
                {
                    "apiVersion": f"{group}/{version}", "kind": "LocalQueue",
                    "metadata": {"name": "lq"}, "spec": {"clusterQueue": f"cq-{t}"},
                },
            )  # fmt: skip
        time.sleep(3)  # the queues become active
        view = PodWatch(Kube(api), run, jobs=True)
        view.start()

        def submit(spec: JobSpec) -> None:
            name = f"job-{spec.index}"
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kueue.x-k8s.io/queue-name": "lq",
                        "kueue.x-k8s.io/priority-class": spec.priority,
                    },
                },
                "spec": {
                    "suspend": True,
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "annotations": {"kubesim.io/run-duration": f"{args.run_seconds}s"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{
                                "name": "main",
                                "image": "pytorch",
                                "command": ["python", "train.py"],
                                "resources": {
                                    "requests": {
                                        "cpu": "2", "memory": "8Gi",
                                        "nvidia.com/gpu": str(spec.gpus),
                                    },
                                    "limits": {"nvidia.com/gpu": str(spec.gpus)},
                                },
                            }],
                        },
                    },
                },
            }  # fmt: skip
            t0 = time.time()
            try:
                batch.create_namespaced_job(namespaces[spec.team], body)
            except Exception as exc:
                run.notes.append(f"submit {name}: {exc}")
                return
            run.submitted[name] = t0
            run.klass[name], run.team[name], run.gpus[name] = spec.priority, spec.team, spec.gpus

        with ThreadPoolExecutor(SUBMITTERS) as pool:
            list(pool.map(submit, jobs))
        run.submit_done = time.time()
        run.allocation = view.allocation()
        wait_done(run, len(run.submitted))
        run.cpu = cpu_seconds()
        view.stop.set()
    return run


# --- main ------------------------------------------------------------------------------------


def recreate_database(name: str) -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", name], check=True, env=env)
    subprocess.run(["createdb", *base, name], check=True, env=env)


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


def apiserver_requests(kubeconfig: Path) -> Counter[str]:
    """Requests the API server has answered so far, per verb (its own /metrics)."""
    from kubernetes import config as k8s_config

    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        response = api.call_api(
            "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
        )[0]
        text = response.data.decode()
    finally:
        api.close()
    per_verb: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        verb = labels.split('verb="', 1)[1].split('"', 1)[0] if 'verb="' in labels else "?"
        per_verb[verb] += int(float(value))
    return per_verb


def with_cluster(nodes: int, fn: Callable[[Any, Path], Run]) -> Run:
    from deploy.devtools import kubesim as ks

    with tempfile.TemporaryDirectory(prefix="admission-bench-") as tmp:
        workdir = Path(tmp)
        topo = workdir / "topology.yaml"
        topo.write_text(topology(nodes))
        before = cpu_seconds()
        cluster = ks.start(workdir / "kubesim", topology=topo)
        try:
            run = fn(cluster, workdir)
            # At the last Job running (``wait_done``): while Kueue's manager still runs.
            after = run.cpu or cpu_seconds()
            run.cpu = {k: v - before.get(k, 0.0) for k, v in after.items() if k != "other"}
            try:
                run.requests = apiserver_requests(cluster.kubeconfig)
            except Exception as exc:  # a figure less, not a failed run
                run.notes.append(f"apiserver metrics: {exc}")
            return run
        finally:
            cluster.stop()


def describe_allocation(run: Run, capacity: int) -> str:
    team = run.allocation.get("team") or Counter()
    klass = run.allocation.get("class") or Counter()
    used = sum(team.values())
    values = sorted(team.values()) or [0]
    classes = ", ".join(f"{c} {klass.get(c, 0)}" for c in CLASSES)
    return (
        f"{used}/{capacity} GPUs running; per team min {values[0]}, median"
        f" {statistics.median(values):.0f}, max {values[-1]}; per class {classes}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=15000)
    parser.add_argument("--teams", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=64, help="H100 nodes of 8 GPUs")
    parser.add_argument("--guarantee", type=int, default=16, help="GPUs guaranteed per team")
    parser.add_argument("--limit", type=int, default=48, help="GPUs a team may hold borrowing")
    parser.add_argument("--run-seconds", type=int, default=30)
    parser.add_argument("--only", choices=("gpupaas", "kueue"))
    parser.add_argument(
        "--web-processes", type=int, default=2, help="gpupaas web workers sharing the submitters"
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
    os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
    os.environ.setdefault("ORCHESTRATION_RECONCILE_CONCURRENCY", "8")
    recreate_database(DB_NAME)
    import django

    django.setup()
    jobs = make_jobs(args.jobs, args.teams)
    shapes = Counter(j.gpus for j in jobs)
    print(
        f"{args.jobs} Jobs ({', '.join(f'{shapes[g]} x {g} GPU' for g, _ in SHAPES)}),"
        f" {args.teams} teams (guarantee {args.guarantee}, limit {args.limit} GPUs),"
        f" {args.nodes} nodes x 8 H100, pods run {args.run_seconds} s",
        flush=True,
    )
    runs: list[Run] = []
    errors: dict[str, str] = {}
    for system in ("gpupaas", "kueue"):
        if args.only and args.only != system:
            continue
        t0 = time.time()
        try:
            if system == "gpupaas":
                runs.append(with_cluster(args.nodes, lambda c, _w: run_gpupaas(args, jobs, c)))
            else:
                runs.append(with_cluster(args.nodes, lambda c, w: run_kueue(args, jobs, c, w)))
        except Exception as exc:
            errors[system] = f"{type(exc).__name__}: {exc}"
        print(f"{system}: {time.time() - t0:.0f} s", flush=True)
        if runs and runs[-1].system == system:  # its figures now, in case a later side fails
            print(json.dumps({"report": runs[-1].report()}, default=str), flush=True)
            print(
                f"{system} CPU seconds: "
                + ", ".join(f"{k} {v:.0f}" for k, v in sorted(runs[-1].cpu.items())),
                flush=True,
            )
            requests = runs[-1].requests
            print(
                f"{system} API server requests: {sum(requests.values())}"
                f" ({sum(requests.values()) / max(1, len(runs[-1].submitted)):.1f} per Job; "
                + ", ".join(f"{verb} {n}" for verb, n in requests.most_common())
                + ")",
                flush=True,
            )

    capacity = args.nodes * 8
    print("\n| system | submitted | submit/s | admitted | admissions/s | submit→admitted p50 / p99"
          " | submit→running p50 / p99 | running | GPUs busy |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    reports = [r.report() for r in runs]
    for r in reports:
        print(
            f"| {r['system']} | {r['submitted']} | {r['submit_rate']:.1f} | {r['admitted']}"
            f" | {r['adm_rate']:.1f} | {r['adm_p50']:.2f} / {r['adm_p99']:.2f} s"
            f" | {r['run_p50']:.2f} / {r['run_p99']:.2f} s | {r['running']} | {r['busy']:.0%} |"
        )
    for run in runs:
        print(f"{run.system} allocation when the last Job was submitted: "
              f"{describe_allocation(run, capacity)}")  # fmt: skip
        for note in Counter(n.split(":")[0].split(" ")[0] for n in run.notes).items():
            print(f"  notes: {note}")
        for note in run.notes[:5]:
            print(f"    {note[:300]}")
        for name, values in [*run.stages.items(), *run.loops.items()]:
            if values:
                print(
                    f"  {name}: n {len(values)}, p50 {statistics.median(values):.2f} s,"
                    f" p90 {pct(values, 0.9):.2f} s, max {max(values):.2f} s"
                )
    if len(reports) == 2:
        ours, theirs = reports
        print(
            f"\ngpupaas ÷ Kueue: admissions/s {ours['adm_rate'] / theirs['adm_rate']:.2f}x;"
            f" submit→running p50 {theirs['run_p50'] / ours['run_p50']:.2f}x faster,"
            f" p99 {theirs['run_p99'] / ours['run_p99']:.2f}x faster"
        )
    for system, error in errors.items():
        print(f"\n{system} could not run: {error}")
    print(json.dumps({"reports": reports, "errors": errors}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
