"""Benchmark orchestration on the simulated cluster, through the scheduler.

1. Submit → admitted → running for 200 workloads of mixed kinds and sharing modes (whole,
   time-sliced, MIG, HAMi; jobs and sweeps), the path a request takes in production:
   ``workload_submit`` (the request rules), the scheduling cycle (``scheduling_cycle_run``,
   what the Celery task ``run_cycle`` calls), ``workload_reconcile`` for each admitted
   workload (what a worker does for the scheduler's hand-off) and the status sync pass
   running concurrently (as beat does). Every workload that does not reach running is listed
   with the scheduler's or the cluster's reason.
   Baseline in the same run: the same 200 workloads written directly as admitted (no request
   rules, no scheduler, no placement: Kubernetes alone decides where they go), reconciled and
   synced the same way; and a bare Job create through the Kubernetes client.
2. One reconcile pass over 2,000 live workloads whose objects already exist (the steady
   state every beat tick pays), and the first pass that creates them. Baseline: one raw list
   of all Jobs — the floor under what a reconcile can cost.

Run: .venv/bin/python bench/orchestration_bench.py [--workloads 200] [--pass-size 2000]
Needs PostgreSQL as for the tests (role gpupaas with CREATEDB) and Go for kubesim. The bench
drops and recreates its own database (``--db-name``), never the one in DATABASE_URL.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DEFAULT_DB_NAME = "gpupaas_bench_orchestration"
RUNNING_DEADLINE_S = 300.0
STALL_S = 30.0


def recreate_database(name: str) -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", name], check=True, env=env)
    subprocess.run(["createdb", *base, name], check=True, env=env)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"p50 {statistics.median(values):.2f} s, p95 {pct(values, 0.95):.2f} s,"
        f" max {max(values):.2f} s"
    )


@dataclass
class PathRun:
    """What one path (through the scheduler, or direct) measured."""

    label: str
    ids: list[int] = field(default_factory=list)
    submitted_at: dict[int, float] = field(default_factory=dict)
    admitted_at: dict[int, float] = field(default_factory=dict)
    picked_at: dict[int, float] = field(default_factory=dict)
    running_at: dict[int, float] = field(default_factory=dict)
    cycles: list[float] = field(default_factory=list)
    total_s: float = 0.0

    def to_admitted(self) -> list[float]:
        return [self.admitted_at[pk] - self.submitted_at[pk] for pk in self.admitted_at]

    def to_running(self) -> list[float]:
        return [self.running_at[pk] - self.admitted_at[pk] for pk in self.running_at]

    def pickup_to_running(self) -> list[float]:
        return [self.running_at[pk] - self.picked_at[pk] for pk in self.running_at]


class Pipeline:
    """Reconcile workers fed by a queue (the hand-off) and the status sync loop beside them."""

    def __init__(self, run: PathRun, cluster: Any, reconcilers: int) -> None:
        self.run = run
        self.cluster = cluster
        self.todo: queue.Queue[int | None] = queue.Queue()
        self.done = threading.Event()
        self.workers = [threading.Thread(target=self._reconcile) for _ in range(reconcilers)]
        self.syncer = threading.Thread(target=self._sync)

    def start(self) -> None:
        for t in (*self.workers, self.syncer):
            t.start()

    def hand_off(self, ids: list[int] | tuple[int, ...]) -> None:
        now = time.perf_counter()
        for pk in ids:
            self.run.admitted_at.setdefault(pk, now)
            self.todo.put(pk)

    def finish(self, admitted_expected: Callable[[], int]) -> None:
        """Wait until every admitted workload runs (or the deadline), then stop the threads."""
        for _ in self.workers:
            self.todo.put(None)
        for t in self.workers:
            t.join()
        deadline = time.perf_counter() + RUNNING_DEADLINE_S
        seen, progress = -1, time.perf_counter()
        while time.perf_counter() < deadline and len(self.run.running_at) < admitted_expected():
            if len(self.run.running_at) != seen:
                seen, progress = len(self.run.running_at), time.perf_counter()
            elif time.perf_counter() - progress > STALL_S:
                break  # nothing started for a while: what is left will not start
            time.sleep(0.2)
        self.done.set()
        self.syncer.join()

    def _reconcile(self) -> None:
        from django.db import connection

        from apps.orchestration import services

        while (pk := self.todo.get()) is not None:
            self.run.picked_at[pk] = time.perf_counter()
            services.workload_reconcile(workload_id=pk)
        connection.close()

    def _sync(self) -> None:
        # The beat-driven status sync, every ORCHESTRATION_STATUS_SYNC_SECONDS in
        # production; here as fast as it goes, concurrently with the reconciles.
        from django.db import connection

        from apps.orchestration import services
        from apps.workloads import core as wl
        from apps.workloads.models import Workload

        while not self.done.is_set():
            services.status_sync_pass(cluster=self.cluster)
            now = time.perf_counter()
            for pk in Workload.objects.filter(pk__in=self.run.ids, state=wl.RUNNING).values_list(
                "pk", flat=True
            ):
                self.run.running_at.setdefault(pk, now)
            time.sleep(0.2)
        connection.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--pass-size", type=int, default=2000)
    parser.add_argument(
        "--batch",
        type=int,
        default=20,
        help="submissions between two scheduling cycles (each submit queues a cycle; a busy"
        " worker runs one for all that arrived meanwhile)",
    )
    parser.add_argument("--reconcilers", type=int, default=1, help="reconcile worker threads")
    parser.add_argument(
        "--skip-direct", action="store_true", help="leave out the direct-admitted baseline"
    )
    parser.add_argument(
        "--db-name",
        default=DEFAULT_DB_NAME,
        help="the bench's own database, dropped and recreated (default %(default)s)",
    )
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
    os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{args.db_name}"
    recreate_database(args.db_name)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone
    from kubernetes import client as k8s

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.orchestration.clusters import kube_for
    from apps.scheduling.services import scheduling_cycle_run
    from apps.workloads import core as wl
    from apps.workloads.models import Workload
    from apps.workloads.request import WorkloadRequest
    from apps.workloads.services import workload_submit
    from deploy.devtools import kubesim as ks
    from tests.factories import (
        MembershipFactory,
        TeamFactory,
        TeamQuotaFactory,
        UserFactory,
        WorkloadFactory,
    )

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    with tempfile.TemporaryDirectory(prefix="orch-bench-") as tmp:
        cluster_proc = ks.start(Path(tmp) / "kubesim")
        try:
            cluster = Cluster.objects.create(
                name="bench", kubeconfig_path=str(cluster_proc.kubeconfig)
            )
            team = TeamFactory(name="Bench")
            for gpu_class in GpuClass.objects.all():
                TeamQuotaFactory(
                    team=team, gpu_class=gpu_class, guaranteed_milli=0, limit_milli=10**6
                )
            services.team_namespace_ensure(team=team)
            services.cluster_inventory_sync(cluster=cluster)
            owner = UserFactory(username="bench")
            MembershipFactory(user=owner, team=team)
            image = Image.objects.get(name="PyTorch training")
            classes = {c.sharing_mode: c for c in GpuClass.objects.all()}
            kube = kube_for(cluster)
            batch = k8s.BatchV1Api(kube.api_client)
            core_api = k8s.CoreV1Api(kube.api_client)

            # Baseline: a bare Job create (no labels check, no database).
            bare = []
            for i in range(20):
                body = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {"name": f"bare-{i}"},
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "securityContext": {
                                    "runAsNonRoot": True,
                                    "runAsUser": 1000,
                                    "seccompProfile": {"type": "RuntimeDefault"},
                                },
                                "containers": [
                                    {
                                        "name": "x",
                                        "image": "busybox",
                                        "securityContext": {
                                            "allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]},
                                        },
                                    }
                                ],
                            }
                        }
                    },
                }
                t0 = time.perf_counter()
                batch.create_namespaced_job(team.namespace, body)
                bare.append(time.perf_counter() - t0)
            batch.delete_collection_namespaced_job(team.namespace, propagation_policy="Background")

            # 1. A mix of kinds and sharing modes that fills the default topology's GPUs
            #    exactly: 32 whole H100, 32 time-sliced L40S slots, the 64 MIG instances
            #    (48 jobs, 8 sweeps of two points), 80 HAMi vGPUs. Each pod also asks for
            #    2 CPUs (the workload default), and the one HAMi node has 128: 64 HAMi pods
            #    fit, so 16 of the 200 are more than the topology can run at once.
            mix = (
                [("whole", 1000, wl.KIND_TRAINING)] * 32
                + [("timeslice", 250, wl.KIND_TRAINING)] * 32
                + [("mig", 125, wl.KIND_TRAINING)] * 32
                + [("mig", 500, wl.KIND_TRAINING)] * 16
                + [("mig", 250, wl.KIND_SWEEP)] * 8
                + [("hami", 100, wl.KIND_TRAINING)] * 80
            )
            requests = [mix[i % len(mix)] for i in range(args.workloads)]
            pod_annotations = {"kubesim.io/run-duration": "1h"}

            def pods_not_running(ids: list[int]) -> dict[int, str]:
                """Per workload id, the scheduling message of a pod that is not running."""
                out: dict[int, str] = {}
                pods = core_api.list_namespaced_pod(
                    team.namespace, label_selector="gpupaas.io/workload-id"
                ).items
                wanted = set(ids)
                for pod in pods:
                    pk = int(pod.metadata.labels["gpupaas.io/workload-id"])
                    if pk not in wanted or pod.status.phase == "Running":
                        continue
                    why = next(
                        (
                            c.message
                            for c in pod.status.conditions or []
                            if c.type == "PodScheduled" and c.message
                        ),
                        pod.status.phase,
                    )
                    out.setdefault(pk, f"pod {pod.status.phase}: {why}")
                return out

            def clear(ids: list[int]) -> None:
                """Cancel the path's workloads and wait until their pods are gone."""
                Workload.objects.filter(pk__in=ids).update(state=wl.CANCELLED)
                deadline = time.perf_counter() + 180
                while time.perf_counter() < deadline:
                    services.reconcile_pass(cluster=cluster)
                    left = core_api.list_namespaced_pod(
                        team.namespace, label_selector="gpupaas.io/workload-id"
                    ).items
                    if not left:
                        return
                    time.sleep(1)
                print(f"  (warning: {len(left)} pods still present after clean-up)")

            def report(run: PathRun, waiting_reason: dict[int, str]) -> None:
                n, admitted = len(run.ids), len(run.admitted_at)
                print(f"{run.label}: {n} workloads in {run.total_s:.1f} s")
                if run.cycles:
                    print(
                        f"  scheduling cycles: {len(run.cycles)},"
                        f" p50 {statistics.median(run.cycles) * 1000:.0f} ms,"
                        f" max {max(run.cycles) * 1000:.0f} ms"
                    )
                    print(f"  submit -> admitted      : {summary(run.to_admitted())}")
                print(f"  admitted                : {admitted}/{n}")
                print(f"  admitted -> running     : {summary(run.to_running())}")
                print(f"  worker pick-up -> running: {summary(run.pickup_to_running())}")
                print(f"  reached running         : {len(run.running_at)}/{admitted} admitted")
                missing = [pk for pk in run.ids if pk not in run.running_at]
                if not missing:
                    return
                rows = Workload.objects.filter(pk__in=missing).select_related("gpu_class")
                pod_why = pods_not_running(missing)
                why = Counter()
                for w in rows:
                    reason = pod_why.get(w.pk) or waiting_reason.get(w.pk) or w.last_reason
                    reason = re.sub(r"(\d+|nobody) ahead of you", "N ahead of you", reason)
                    why[(w.gpu_class.name, w.gpu_milli, w.state, reason)] += 1
                print(f"  not running ({len(missing)}):")
                for (name, milli, state, reason), count in sorted(why.items()):
                    print(f"    {count} x {name} {milli}m, {state}: {reason}")

            # 1a. Through the scheduler.
            ours = PathRun("submit -> cycle -> reconcile -> running (through the scheduler)")
            pipeline = Pipeline(ours, cluster, args.reconcilers)
            start = time.perf_counter()
            pipeline.start()
            for first in range(0, len(requests), args.batch):
                for i, (mode, milli, kind) in enumerate(
                    requests[first : first + args.batch], start=first
                ):
                    t0 = time.perf_counter()
                    w = workload_submit(
                        actor=owner,
                        team=team,
                        gpu_class=classes[mode],
                        image=image,
                        request=WorkloadRequest.of(
                            kind=kind,
                            name=f"bench-{i}",
                            gpu_milli=milli,
                            command=["python", "train.py"],
                            grid={"lr": ["0.1", "0.01"]} if kind == wl.KIND_SWEEP else None,
                            params={"pod_annotations": pod_annotations},
                        ),
                    )
                    ours.ids.append(w.pk)
                    ours.submitted_at[w.pk] = t0
                t0 = time.perf_counter()
                cycle = scheduling_cycle_run()
                ours.cycles.append(time.perf_counter() - t0)
                pipeline.hand_off(cycle.admitted)
            t0 = time.perf_counter()
            cycle = scheduling_cycle_run()  # nothing new should fit; its reasons are kept
            ours.cycles.append(time.perf_counter() - t0)
            pipeline.hand_off(cycle.admitted)
            pipeline.finish(lambda: len(ours.admitted_at))
            ours.total_s = time.perf_counter() - start
            report(ours, {})
            print("  placed per node (pods, CPU and memory asked / allocatable):")
            for node, n_pods, cpu, cpu_cap, mem, mem_cap in node_commitments(ours.ids):
                over = "  <-- over allocatable" if cpu > cpu_cap or mem > mem_cap else ""
                print(
                    f"    {node}: {n_pods} pods, CPU {cpu // 1000}/{cpu_cap // 1000},"
                    f" memory {mem // 1024}/{mem_cap // 1024} GiB{over}"
                )
            clear(ours.ids)

            # 1b. Baseline: written directly as admitted, Kubernetes alone places them.
            direct = PathRun("direct admitted -> reconcile -> running (baseline, no scheduler)")
            if not args.skip_direct:
                for i, (mode, milli, kind) in enumerate(requests):
                    params: dict[str, Any] = {"pod_annotations": pod_annotations}
                    if kind == wl.KIND_SWEEP:
                        params["grid"] = {"lr": ["0.1", "0.01"]}
                    w = WorkloadFactory(
                        name=f"direct-{i}",
                        team=team,
                        owner=owner,
                        image=image,
                        gpu_class=classes[mode],
                        gpu_milli=milli,
                        kind=kind,
                        priority_class=wl.DEFAULT_PRIORITY[kind],
                        replicas=2 if kind == wl.KIND_SWEEP else 1,
                        state=wl.ADMITTED,
                        admitted_at=timezone.now(),
                        params=params,
                    )
                    direct.ids.append(w.pk)
                pipeline = Pipeline(direct, cluster, args.reconcilers)
                start = time.perf_counter()
                pipeline.start()
                pipeline.hand_off(direct.ids)
                pipeline.finish(lambda: len(direct.ids))
                direct.total_s = time.perf_counter() - start
                report(direct, {})
                clear(direct.ids)

            print(f"  baseline: bare Job create p50 {statistics.median(bare) * 1000:.1f} ms")
            if not args.skip_direct and ours.running_at and direct.running_at:
                a, b = ours.pickup_to_running(), direct.pickup_to_running()
                print(
                    "  through the scheduler / direct, worker pick-up -> running:"
                    f" p50 {statistics.median(a) / statistics.median(b):.2f}x,"
                    f" p95 {pct(a, 0.95) / pct(b, 0.95):.2f}x"
                )

            # 2. A reconcile pass over N live workloads, spread over as many teams as the
            #    per-namespace object counts (TEAM_MAX_JOBS, TEAM_MAX_PODS) ask for.
            small = classes["whole"]
            per_team = min(settings.TEAM_MAX_JOBS, settings.TEAM_MAX_PODS) // 2
            pass_teams = []
            for t in range(-(-args.pass_size // per_team)):
                pass_team = TeamFactory(name=f"Pass {t}")
                TeamQuotaFactory(
                    team=pass_team, gpu_class=small, guaranteed_milli=0, limit_milli=10**6
                )
                services.team_namespace_ensure(team=pass_team)
                pass_teams.append(pass_team)
            created = [
                Workload(
                    name=f"pass-{i}",
                    kind=wl.KIND_TRAINING,
                    owner=owner,
                    team=pass_teams[i // per_team],
                    gpu_class=small,
                    image=image,
                    gpu_milli=1000,
                    charged_milli=1000,
                    command=["python", "train.py"],
                    priority_class=wl.PRIORITY_BATCH,
                    state=wl.STARTING,
                    cluster=cluster,
                    params={"pod_annotations": pod_annotations},
                )
                for i in range(args.pass_size)
            ]
            Workload.objects.bulk_create(created, batch_size=1000)
            t0 = time.perf_counter()
            first_pass = services.reconcile_pass(cluster=cluster)
            first_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            steady = services.reconcile_pass(cluster=cluster)
            steady_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            # The raw bytes of one list call: the floor under any pass that must see every Job.
            raw = batch.list_job_for_all_namespaces(
                label_selector="gpupaas.io/workload-id", _preload_content=False
            ).data
            list_s = time.perf_counter() - t0
            print(
                f"reconcile pass over {args.pass_size} live workloads"
                f" ({len(pass_teams)} team namespaces)"
            )
            print(
                f"  first pass (creates {first_pass.created} workloads' objects): {first_s:.1f} s"
            )
            print(
                f"  steady pass (all present, {steady.created} recreated): {steady_s:.2f} s"
                f"  target < 5 s"
            )
            print(
                f"  baseline: one raw list of all Jobs ({len(raw) // 1024} KiB)"
                f" {list_s * 1000:.0f} ms;"
                f" steady pass / list = {steady_s / list_s:.1f}x"
            )
        finally:
            cluster_proc.stop()
    from django.db import connections

    connections.close_all()
    recreate_database(args.db_name)
    return 0


def node_commitments(ids: list[int]) -> list[tuple[str, int, int, int, int, int]]:
    """Per node the admitted workloads' placed pods, CPU and memory against what the node
    offers: (node, pods, cpu_milli, node cpu_milli, memory_mib, node memory_mib)."""
    from apps.catalog.models import ClusterNode
    from apps.workloads.models import Workload

    pods: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    mem: Counter[str] = Counter()
    placed = Workload.objects.filter(pk__in=ids, admitted_at__isnull=False).values_list(
        "placement", "cpu_milli", "memory_mib"
    )
    for placement, cpu_milli, memory_mib in placed:
        for replica in (placement or {}).get("replicas", []):
            pods[replica["node"]] += 1
            cpu[replica["node"]] += cpu_milli
            mem[replica["node"]] += memory_mib
    nodes = {n.name: n for n in ClusterNode.objects.filter(name__in=list(pods))}
    return [
        (name, pods[name], cpu[name], nodes[name].cpu_milli, mem[name], nodes[name].memory_mib)
        for name in sorted(pods)
    ]


if __name__ == "__main__":
    raise SystemExit(main())
