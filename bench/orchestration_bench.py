"""Benchmark orchestration on the simulated cluster.

1. Time from admitted to running (as seen by the status sync), p50 and p95, over 200
   workloads of mixed kinds and sharing modes (whole, time-sliced, MIG, HAMi; jobs and sweeps).
2. One reconcile pass over 2,000 live workloads whose objects already exist (the steady
   state every beat tick pays), and the first pass that creates them.
Baselines measured in the same run: a bare Job create through the Kubernetes client, and a
bare list of Jobs — the floor under what a reconcile can cost.

Run: .venv/bin/python bench/orchestration_bench.py [--workloads 200] [--pass-size 2000]
Needs PostgreSQL as for the tests (role gpupaas with CREATEDB) and Go for kubesim.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_orchestration"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=200)
    parser.add_argument("--pass-size", type=int, default=2000)
    args = parser.parse_args()

    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone
    from kubernetes import client as k8s

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.orchestration.clusters import kube_for
    from apps.workloads import core as wl
    from apps.workloads.models import Workload
    from deploy.devtools import kubesim as ks
    from tests.factories import TeamFactory, TeamQuotaFactory, UserFactory, WorkloadFactory

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
            image = Image.objects.get(name="PyTorch training")
            classes = {c.sharing_mode: c for c in GpuClass.objects.all()}
            kube = kube_for(cluster)
            batch = k8s.BatchV1Api(kube.api_client)

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

            # 1. admitted -> running for a mix of kinds and sharing modes that fills the
            #    default topology exactly (so every workload can run).
            mix = (
                [("whole", 1000, wl.KIND_TRAINING)] * 32
                + [("timeslice", 250, wl.KIND_TRAINING)] * 32
                + [("mig", 125, wl.KIND_TRAINING)] * 32
                + [("mig", 500, wl.KIND_TRAINING)] * 16
                + [("mig", 250, wl.KIND_SWEEP)] * 8
                + [("hami", 100, wl.KIND_TRAINING)] * 80
            )
            workloads = []
            for i in range(args.workloads):
                mode, milli, kind = mix[i % len(mix)]
                params: dict = {"pod_annotations": {"kubesim.io/run-duration": "1h"}}
                if kind == wl.KIND_SWEEP:
                    params["grid"] = {"lr": ["0.1", "0.01"]}
                workloads.append(
                    WorkloadFactory(
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
                )
            admitted_at: dict[int, float] = {}
            running_at: dict[int, float] = {}
            ids = [w.pk for w in workloads]
            done = threading.Event()

            def sync_loop() -> None:
                # The beat-driven status sync, every ORCHESTRATION_STATUS_SYNC_SECONDS in
                # production; here as fast as it goes, concurrently with the reconciles.
                from django.db import connection

                deadline = time.perf_counter() + 300
                while not done.is_set() and time.perf_counter() < deadline:
                    services.status_sync_pass(cluster=cluster)
                    now = time.perf_counter()
                    for pk in Workload.objects.filter(pk__in=ids, state=wl.RUNNING).values_list(
                        "pk", flat=True
                    ):
                        running_at.setdefault(pk, now)
                    if len(running_at) == len(ids):
                        break
                    time.sleep(0.2)
                connection.close()

            start = time.perf_counter()
            syncer = threading.Thread(target=sync_loop)
            syncer.start()
            for w in workloads:  # what a worker does for each admission hand-off
                admitted_at[w.pk] = time.perf_counter()
                services.workload_reconcile(workload_id=w.pk)
            syncer.join()
            done.set()
            latencies = [running_at[pk] - admitted_at[pk] for pk in running_at]
            total = time.perf_counter() - start
            print(f"admitted -> running over {len(workloads)} workloads of mixed kinds")
            print(f"  reached running : {len(running_at)}/{len(workloads)} in {total:.1f} s")
            if latencies:
                print(f"  p50             : {statistics.median(latencies):.2f} s  (target < 2 s)")
                print(f"  p95             : {pct(latencies, 0.95):.2f} s  (target < 5 s)")
            print(f"  baseline: bare Job create p50 {statistics.median(bare) * 1000:.1f} ms")
            Workload.objects.filter(pk__in=[w.pk for w in workloads]).update(state=wl.CANCELLED)
            services.reconcile_pass(cluster=cluster)

            # 2. A reconcile pass over N live workloads.
            small = classes["whole"]
            created = [
                Workload(
                    name=f"pass-{i}",
                    kind=wl.KIND_TRAINING,
                    owner=owner,
                    team=team,
                    gpu_class=small,
                    image=image,
                    gpu_milli=1000,
                    priority_class=wl.PRIORITY_BATCH,
                    state=wl.STARTING,
                    cluster=cluster,
                    params={"pod_annotations": {"kubesim.io/run-duration": "1h"}},
                )
                for i in range(args.pass_size)
            ]
            Workload.objects.bulk_create(created, batch_size=1000)
            t0 = time.perf_counter()
            first = services.reconcile_pass(cluster=cluster)
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
            print(f"reconcile pass over {args.pass_size} live workloads")
            print(f"  first pass (creates {first.created} workloads' objects): {first_s:.1f} s")
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
    recreate_database()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
