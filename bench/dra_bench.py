"""GPUs through DRA against the device plugin: the same workloads, the same simulated cluster,
in the same run.

Each side submits ``--rounds`` rounds of a mix that fills the default topology's whole,
time-sliced and MIG GPUs exactly (32 whole H100, 32 time-sliced L40S slots, 64 MIG instances:
128 workloads a round), through the path a request takes in production: ``workload_submit``,
the scheduling cycle every ``--batch`` submissions, ``workload_reconcile`` by reconcile
workers for each admitted workload, and the status sync pass beside them. A round ends when
every admitted workload runs; its workloads are then cancelled and their pods waited out.

- device plugin: the classes as the catalog seeds them (extended resources in the pods'
  limits);
- DRA: the same classes switched to Dynamic Resource Allocation — each pod gets a
  ResourceClaim from its workload's ResourceClaimTemplate, pinned to the placed GPUs, and the
  upstream scheduler allocates the devices kubesim publishes as NVIDIA's driver does.

Per side: admissions per second (admitted ÷ time from a round's first submit to its last
admission, over all rounds), submit → admitted and admitted → running p50 / p99, the CPU
seconds of this process (the portal's parts: rules, cycle, reconciles, status sync) and of the
simulated cluster's processes (API server, etcd, scheduler, controllers, fake kubelets), and
for DRA how many running pods hold an allocated claim. Then the ratios DRA ÷ device plugin.

Run: .venv/bin/python bench/dra_bench.py [--rounds 8] [--batch 20] [--reconcilers 4]
Needs PostgreSQL as for the tests and Go for kubesim; drops and recreates its own database.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from orchestration_bench import PathRun, Pipeline, pct, recreate_database  # noqa: E402

DEFAULT_DB_NAME = "gpupaas_bench_dra"
# One round: what fills the default topology's GPUs that both allocations can serve (HAMi
# cannot be allocated through DRA and is left out on both sides).
MIX = (
    [("whole", 1000)] * 32
    + [("timeslice", 250)] * 32
    + [("mig", 125)] * 32
    + [("mig", 500)] * 16
    + [("mig", 250)] * 16
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU seconds of a process and all its descendants, from /proc."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(p for p, parent in parents.items() if parent == pid)
    return total


@dataclass
class Side:
    label: str
    runs: list[PathRun] = field(default_factory=list)
    spans: list[float] = field(default_factory=list)  # first submit to last admission, a round
    portal_cpu: float = 0.0
    cluster_cpu: float = 0.0
    claims_allocated: int = 0
    pods_running: int = 0

    def values(self, name: str) -> list[float]:
        return [v for r in self.runs for v in getattr(r, name)()]

    @property
    def admitted(self) -> int:
        return sum(len(r.admitted_at) for r in self.runs)

    @property
    def rate(self) -> float:
        return self.admitted / sum(self.spans) if self.spans else 0.0


def p(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} / {pct(values, 0.99):.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of 128 workloads a side")
    parser.add_argument("--batch", type=int, default=20, help="submissions between two cycles")
    parser.add_argument("--reconcilers", type=int, default=4, help="reconcile worker threads")
    parser.add_argument("--db-name", default=DEFAULT_DB_NAME)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
    os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{args.db_name}"
    recreate_database(args.db_name)
    import django

    django.setup()
    from django.core.management import call_command
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
    from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, UserFactory

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    print(
        f"{args.rounds} rounds of {len(MIX)} workloads a side (32 whole H100, 32 time-sliced"
        f" L40S slots, 64 MIG instances), a cycle every {args.batch} submits,"
        f" {args.reconcilers} reconcile workers",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="dra-bench-") as tmp:
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
            owner = UserFactory(username="bench")
            MembershipFactory(user=owner, team=team)
            image = Image.objects.get(name="PyTorch training")
            modes = ("whole", "timeslice", "mig")
            services.cluster_inventory_sync(cluster=cluster)
            # Per sharing mode, the class the simulated cluster has nodes of.
            classes = {
                c.sharing_mode: c
                for c in GpuClass.objects.filter(sharing_mode__in=modes, capacity_gpus__gt=0)
            }
            assert set(classes) == set(modes), classes
            kube = kube_for(cluster)
            core_api = k8s.CoreV1Api(kube.api_client)
            custom = k8s.CustomObjectsApi(kube.api_client)

            def clear(ids: list[int]) -> None:
                Workload.objects.filter(pk__in=ids).update(state=wl.CANCELLED)
                deadline = time.perf_counter() + 180
                while time.perf_counter() < deadline:
                    services.reconcile_pass(cluster=cluster)
                    if not core_api.list_namespaced_pod(
                        team.namespace, label_selector="gpupaas.io/workload-id"
                    ).items:
                        return
                    time.sleep(1)
                print("  (warning: pods still present after clean-up)", flush=True)

            def allocated_claims() -> tuple[int, int]:
                pods = [
                    pod
                    for pod in core_api.list_namespaced_pod(
                        team.namespace, label_selector="gpupaas.io/workload-id"
                    ).items
                    if pod.status.phase == "Running"
                ]
                claims = custom.list_namespaced_custom_object(
                    "resource.k8s.io", "v1", team.namespace, "resourceclaims"
                )["items"]
                held = sum(1 for c in claims if (c.get("status") or {}).get("allocation"))
                return held, len(pods)

            def one_side(label: str, allocation: str) -> Side:
                for gpu_class in classes.values():
                    gpu_class.allocation_mode = allocation
                    gpu_class.save(update_fields=["allocation_mode"])
                services.cluster_inventory_sync(cluster=cluster)
                side = Side(label)
                cpu0, cluster0 = time.process_time(), tree_cpu_seconds(cluster_proc.process.pid)
                for round_no in range(args.rounds):
                    run = PathRun(f"{label} round {round_no + 1}")
                    pipeline = Pipeline(run, cluster, args.reconcilers)
                    pipeline.start()
                    started = time.perf_counter()
                    for first in range(0, len(MIX), args.batch):
                        for i, (mode, milli) in enumerate(
                            MIX[first : first + args.batch], start=first
                        ):
                            t0 = time.perf_counter()
                            w = workload_submit(
                                actor=owner,
                                team=team,
                                gpu_class=classes[mode],
                                image=image,
                                request=WorkloadRequest.of(
                                    kind=wl.KIND_TRAINING,
                                    name=f"{allocation}-{round_no}-{i}",
                                    gpu_milli=milli,
                                    command=["python", "train.py"],
                                    params={"pod_annotations": {"kubesim.io/run-duration": "1h"}},
                                ),
                            )
                            run.ids.append(w.pk)
                            run.submitted_at[w.pk] = t0
                        pipeline.hand_off(scheduling_cycle_run().admitted)
                    pipeline.hand_off(scheduling_cycle_run().admitted)
                    pipeline.finish(lambda r=run: len(r.admitted_at))
                    run.total_s = time.perf_counter() - started
                    if run.admitted_at:
                        side.spans.append(max(run.admitted_at.values()) - started)
                    if round_no == 0:
                        side.claims_allocated, side.pods_running = allocated_claims()
                    print(
                        f"  {run.label}: {len(run.admitted_at)}/{len(run.ids)} admitted,"
                        f" {len(run.running_at)} running, {run.total_s:.1f} s",
                        flush=True,
                    )
                    waiting = Counter(
                        f"{w.gpu_class.name} {w.gpu_milli}m: "
                        + re.sub(r"\d+ ahead of you", "N ahead of you", w.last_reason[:160])
                        for w in Workload.objects.filter(pk__in=run.ids)
                        .exclude(pk__in=list(run.admitted_at))
                        .select_related("gpu_class")
                    )
                    for why, count in waiting.most_common(3):
                        print(f"    not admitted: {count} x {why}", flush=True)
                    services.status_sync_pass(cluster=cluster)
                    stalled = Workload.objects.filter(pk__in=list(run.admitted_at)).exclude(
                        pk__in=list(run.running_at)
                    )
                    for w in stalled.select_related("gpu_class")[:3]:
                        print(
                            f"    admitted, not running: {w.gpu_class.name} {w.gpu_milli}m"
                            f" ({w.state}): {w.last_reason[:200]}",
                            flush=True,
                        )
                    side.runs.append(run)
                    clear(run.ids)
                side.portal_cpu = time.process_time() - cpu0
                side.cluster_cpu = tree_cpu_seconds(cluster_proc.process.pid) - cluster0
                return side

            sides = [
                one_side("device plugin", GpuClass.Allocation.DEVICE_PLUGIN),
                one_side("DRA", GpuClass.Allocation.DRA),
            ]
        finally:
            cluster_proc.stop()

    print(
        "\n| allocation | workloads | admitted | admissions/s | submit→admitted p50 / p99"
        " | admitted→running p50 / p99 | CPU s: portal / cluster | claims allocated |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for s in sides:
        claims = f"{s.claims_allocated} of {s.pods_running} pods" if s.label == "DRA" else "-"
        print(
            f"| {s.label} | {sum(len(r.ids) for r in s.runs)} | {s.admitted} | {s.rate:.1f}"
            f" | {p(s.values('to_admitted'))} | {p(s.values('to_running'))}"
            f" | {s.portal_cpu:.0f} / {s.cluster_cpu:.0f} | {claims} |"
        )
    plugin, dra = sides
    a, b = dra.values("to_running"), plugin.values("to_running")
    if a and b and plugin.rate:
        print(
            f"DRA / device plugin: admissions/s {dra.rate / plugin.rate:.2f}x,"
            f" admitted→running p50 {statistics.median(a) / statistics.median(b):.2f}x,"
            f" p99 {pct(a, 0.99) / pct(b, 0.99):.2f}x,"
            f" CPU portal {dra.portal_cpu / max(plugin.portal_cpu, 1e-9):.2f}x,"
            f" cluster {dra.cluster_cpu / max(plugin.cluster_cpu, 1e-9):.2f}x"
        )
    from django.db import connections

    connections.close_all()
    recreate_database(args.db_name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
