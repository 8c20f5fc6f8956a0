"""Status from watch streams against today's periodic lists, on the simulated cluster.

2,000 live workloads (four team namespaces of 500, state STARTING, one pod each with our
labels). The pods carry ``schedulerName: none`` so that nothing but this benchmark changes
them: a *status change* is this benchmark patching one pod's status to Running (through the
API server's status subresource, as a kubelet does), at a steady rate; the *portal state* is
the workload's RUNNING event in PostgreSQL (what every page and the API read). Latency =
event time − the moment the patch was sent.

Two modes, one after the other, on disjoint workloads of the same cluster and database:

* lists (today): the status sync pass (two list calls, every live workload) every
  ``ORCHESTRATION_STATUS_SYNC_SECONDS`` (3 s) as beat runs it, the inventory once a minute;
* watches: ``ClusterWatch`` (pods, Jobs and GPU nodes followed by watch streams; the
  status update service for the changed workloads only), with the safety-net pass every 60 s
  and the inventory every 600 s (``ORCHESTRATION_WATCH``'s defaults).

API-server requests are counted at our client (every call the adapter makes; a watch
connection counts once), per minute of each mode's window.

Run: .venv/bin/python bench/watch_bench.py [--workloads 2000] [--changes 200] [--rate 10]
                                        [--window 60]
Needs PostgreSQL as for the tests and the kubesim binary; the bench drops and recreates its
own database (``--db-name``), never the one in DATABASE_URL.
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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DEFAULT_DB_NAME = "gpupaas_bench_watch"
PER_NAMESPACE = 500


def recreate_database(name: str) -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", name], check=True, env=env)
    subprocess.run(["createdb", *base, name], check=True, env=env)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Counting:
    """Counts the calls made through one API client (the adapter's only way out)."""

    def __init__(self, api_client: Any) -> None:
        self.count = 0
        self.lock = threading.Lock()
        original = api_client.call_api

        def call_api(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.count += 1
            return original(*args, **kwargs)

        api_client.call_api = call_api


def pod_body(workload_id: int, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"w{workload_id}", "labels": labels},
        "spec": {
            "schedulerName": "none",  # nothing but the benchmark changes it
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def running_status() -> dict[str, Any]:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "phase": "Running",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": [
                {
                    "name": "main",
                    "image": "busybox",
                    "imageID": "",
                    "ready": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000, help="live workloads")
    parser.add_argument("--changes", type=int, default=200, help="status changes per mode")
    parser.add_argument("--rate", type=float, default=10.0, help="status changes per second")
    parser.add_argument(
        "--window", type=float, default=60.0, help="seconds per mode over which requests count"
    )
    parser.add_argument("--db-name", default=DEFAULT_DB_NAME)
    args = parser.parse_args()
    if 2 * args.changes > args.workloads:
        parser.error("--changes: at most half of --workloads (the modes change disjoint ones)")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
    os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{args.db_name}"
    recreate_database(args.db_name)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from kubernetes import client as k8s

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import manifests as m
    from apps.orchestration import services
    from apps.orchestration.clusters import kube_for
    from apps.orchestration.watch import ClusterWatch
    from apps.workloads import core as wl
    from apps.workloads.models import Workload, WorkloadEvent
    from deploy.devtools import kubesim as ks
    from tests.factories import TeamFactory, TeamQuotaFactory, UserFactory

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
        cluster_proc = ks.start(Path(tmp) / "kubesim")
        try:
            cluster = Cluster.objects.create(
                name="bench", kubeconfig_path=str(cluster_proc.kubeconfig)
            )
            kube = kube_for(cluster)
            counter = Counting(kube.api_client)
            services.cluster_inventory_sync(cluster=cluster)
            gpu_class = GpuClass.objects.get(sharing_mode="whole")
            image = Image.objects.get(name="PyTorch training")
            owner = UserFactory(username="bench")
            teams = []
            for t in range(-(-args.workloads // PER_NAMESPACE)):
                team = TeamFactory(name=f"Watch {t}")
                TeamQuotaFactory(
                    team=team, gpu_class=gpu_class, guaranteed_milli=0, limit_milli=10**7
                )
                services.team_namespace_ensure(team=team)
                teams.append(team)
            workloads = Workload.objects.bulk_create(
                [
                    Workload(
                        name=f"w-{i}",
                        kind=wl.KIND_TRAINING,
                        owner=owner,
                        team=teams[i // PER_NAMESPACE],
                        gpu_class=gpu_class,
                        image=image,
                        gpu_milli=1000,
                        charged_milli=1000,
                        command=["python", "train.py"],
                        priority_class=wl.PRIORITY_BATCH,
                        state=wl.STARTING,
                        cluster=cluster,
                    )
                    for i in range(args.workloads)
                ],
                batch_size=1000,
            )
            # The benchmark's own calls (creating pods, the status changes) go through a client
            # of their own, so that the count is the platform's alone.
            from kubernetes import config as k8s_config

            core = k8s.CoreV1Api(
                k8s_config.new_client_from_config(config_file=str(cluster_proc.kubeconfig))
            )
            where = {w.pk: w.team.namespace for w in workloads}

            def create(pk: int) -> None:
                labels = {m.LABEL_MANAGED_BY: m.MANAGED_BY, m.LABEL_WORKLOAD: str(pk)}
                core.create_namespaced_pod(where[pk], pod_body(pk, labels))

            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(create, where))
            print(
                f"{args.workloads} live workloads with one pod each in {len(teams)} namespaces"
                f" (pods created in {time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
            services.status_sync_pass(cluster=cluster)  # settle every reason once
            ids = [w.pk for w in workloads]
            sets = {"lists": ids[: args.changes], "watches": ids[args.changes : 2 * args.changes]}

            def drive(changed: list[int]) -> dict[int, float]:
                """Patch the pods' status at the rate; when each patch was sent."""
                sent: dict[int, float] = {}
                start = time.time()
                for n, pk in enumerate(changed):
                    delay = start + n / args.rate - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    sent[pk] = time.time()
                    core.patch_namespaced_pod_status(f"w{pk}", where[pk], running_status())
                return sent

            def measure(mode: str, background: Callable[[threading.Event], None]) -> dict:
                stop = threading.Event()
                thread = threading.Thread(target=background, args=(stop,))
                before = counter.count
                t_start = time.time()
                thread.start()
                sent = drive(sets[mode])
                deadline = time.time() + 60
                changed = sets[mode]
                while time.time() < deadline:
                    done = WorkloadEvent.objects.filter(
                        workload_id__in=changed, to_state=wl.RUNNING
                    ).count()
                    if done == len(changed):
                        break
                    time.sleep(0.1)
                # Requests are counted over a whole window, beyond the changes themselves.
                while time.time() < t_start + args.window:
                    time.sleep(0.1)
                window = time.time() - t_start
                requests = counter.count - before
                stop.set()
                thread.join()
                reached = dict(
                    WorkloadEvent.objects.filter(
                        workload_id__in=changed, to_state=wl.RUNNING
                    ).values_list("workload_id", "created_at")
                )
                lat = [reached[pk].timestamp() - sent[pk] for pk in changed if pk in reached]
                return {
                    "mode": mode,
                    "reached": len(reached),
                    "changes": len(changed),
                    "p50": statistics.median(lat) if lat else float("nan"),
                    "p99": pct(lat, 0.99) if lat else float("nan"),
                    "max": max(lat) if lat else float("nan"),
                    "window": window,
                    "requests": requests,
                    "per_min": requests / window * 60,
                }

            def lists(stop: threading.Event) -> None:
                # beat: status sync every 3 s, inventory every 60 s
                next_inventory = 0.0
                while not stop.is_set():
                    begun = time.monotonic()
                    if begun >= next_inventory:
                        services.cluster_inventory_sync(cluster=cluster)
                        next_inventory = begun + 60
                    services.status_sync_pass(cluster=cluster)
                    stop.wait(max(0.0, 3.0 - (time.monotonic() - begun)))
                connection.close()

            watch_stats: dict[str, Any] = {}

            def watches(stop: threading.Event) -> None:
                watch = ClusterWatch(cluster, kube=kube)
                watch.start()
                next_net = time.monotonic() + 60  # the safety net, ORCHESTRATION_WATCH default
                try:
                    while not stop.is_set():
                        watch.step(timeout=0.5)
                        if time.monotonic() >= next_net:
                            services.status_sync_pass(cluster=cluster)
                            next_net = time.monotonic() + 60
                finally:
                    watch.stop()
                    watch_stats.update(watch.stats())
                    connection.close()

            results = [measure("lists", lists), measure("watches", watches)]
            pods_json = len(
                core.list_pod_for_all_namespaces(
                    label_selector=m.LABEL_WORKLOAD, _preload_content=False
                ).data
            )
        finally:
            cluster_proc.stop()

    print(
        f"\n{args.changes} status changes per mode at {args.rate:g}/s over"
        f" {args.workloads} live workloads (one list of their pods: {pods_json / 1e6:.1f} MB)\n"
    )
    print("| mode | reached | p50 s | p99 s | max s | API requests | per minute | window s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['mode']} | {r['reached']} of {r['changes']} | {r['p50']:.2f} | {r['p99']:.2f}"
            f" | {r['max']:.2f} | {r['requests']} | {r['per_min']:.1f} | {r['window']:.0f} |"
        )
    lists_r, watch_r = results
    print(
        f"\nwatches vs lists: p50 {lists_r['p50'] / watch_r['p50']:.1f}x lower,"
        f" p99 {lists_r['p99'] / watch_r['p99']:.1f}x lower,"
        f" requests per minute {lists_r['per_min'] / max(watch_r['per_min'], 1e-9):.1f}x fewer"
    )
    for kind, s in watch_stats.items():
        print(
            f"  {kind} informer: lists {s.lists}, watches {s.watches}, events {s.events},"
            f" bookmarks {s.bookmarks}, reconnects {s.reconnects}, relists {s.relists}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
