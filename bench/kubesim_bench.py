"""Benchmark kubesim: time up -> READY, idle memory of the process tree, pod throughput.

Run: .venv/bin/python bench/kubesim_bench.py [--pods 500] [--topology FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kubernetes import client, config  # noqa: E402

from deploy.devtools import kubesim as ks  # noqa: E402


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _comm(pid: int) -> str:
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return args[1].decode() if len(args) > 1 and args[1] else args[0].decode()


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_pids(root: int) -> list[int]:
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(_children(pid))
    return pids


def tree_rss(root: int) -> dict[str, int]:
    """RSS in KiB per process of the tree under ``root`` (keyed by kubesim subcommand)."""
    result: dict[str, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        result[f"{_comm(pid)}[{pid}]"] = _rss_kib(pid)
        todo.extend(_children(pid))
    return result


def pod(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main", image="registry.invalid/bench:1")]
        ),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--topology", type=Path, default=None)
    parser.add_argument("--idle-seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args()

    started = time.monotonic()
    binary = ks.ensure_binary()
    build_s = time.monotonic() - started
    figures: dict[str, object] = {
        "binary": str(binary),
        "binary_mib": round(binary.stat().st_size / 2**20, 1),
        "ensure_binary_s": round(build_s, 1),
    }

    with tempfile.TemporaryDirectory(prefix="kubesim-bench-") as tmp:
        t0 = time.monotonic()
        cluster = ks.start(Path(tmp) / "data", topology=args.topology)
        figures["up_to_ready_s"] = round(time.monotonic() - t0, 2)
        figures["nodes"] = len(cluster.nodes)
        try:
            pids = tree_pids(cluster.pid)
            cpu0, wall0 = sum(_cpu_seconds(p) for p in pids), time.monotonic()
            time.sleep(args.idle_seconds)
            cpu = sum(_cpu_seconds(p) for p in pids) - cpu0
            figures["idle_cpu_percent_of_one_core"] = round(
                100 * cpu / (time.monotonic() - wall0), 1
            )
            per_process = tree_rss(cluster.pid)
            figures["idle_rss_mib"] = round(sum(per_process.values()) / 1024, 1)
            figures["idle_rss_mib_per_process"] = {
                k: round(v / 1024, 1) for k, v in sorted(per_process.items())
            }

            cfg = client.Configuration()
            config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
            cfg.connection_pool_maxsize = args.threads * 2
            api = client.ApiClient(cfg)
            core = client.CoreV1Api(api)
            ns = f"bench-{uuid.uuid4().hex[:6]}"
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
            while True:
                try:
                    core.read_namespaced_service_account("default", ns)
                    break
                except client.ApiException:
                    time.sleep(0.1)

            t1 = time.monotonic()
            with ThreadPoolExecutor(args.threads) as pool:
                list(
                    pool.map(
                        lambda i: core.create_namespaced_pod(ns, pod(f"p{i:05d}")),
                        range(args.pods),
                    )
                )
            created_s = time.monotonic() - t1
            running = 0
            while running < args.pods:
                items = core.list_namespaced_pod(ns).items
                running = sum(1 for p in items if p.status.phase == "Running")
                if time.monotonic() - t1 > 600:
                    raise RuntimeError(f"only {running}/{args.pods} pods Running after 600s")
                if running < args.pods:
                    time.sleep(0.2)
            all_running_s = time.monotonic() - t1
            figures["pods"] = args.pods
            figures["pods_create_s"] = round(created_s, 2)
            figures["pods_create_to_running_s"] = round(all_running_s, 2)
            figures["pods_per_s"] = round(args.pods / all_running_s, 1)
            busy = tree_rss(cluster.pid)
            figures["rss_mib_with_pods"] = round(sum(busy.values()) / 1024, 1)
            api.close()
        finally:
            t2 = time.monotonic()
            figures["stop_exit_code"] = cluster.stop()
            figures["stop_s"] = round(time.monotonic() - t2, 2)

    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            if isinstance(value, dict):
                print(f"{key}:")
                for k, v in value.items():
                    print(f"    {k:40} {v}")
            else:
                print(f"{key:28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
