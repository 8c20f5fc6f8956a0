"""Log streams beside the portal: 50 concurrent ``logs?follow=true`` while /healthz and the
API list are probed, on the production configuration and on the one it replaced.

The server runs twice in the same run, with the production settings module and
``gpupaas/gunicorn_conf.py``, PostgreSQL and Redis:

* baseline: gunicorn's sync workers on ``gpupaas.wsgi`` (the configuration before ASGI);
* new: the configuration as it is (uvicorn's worker on ``gpupaas.asgi``).

One workload runs on the simulated cluster (deploy/kubesim; its fake kubelet writes one log
line per second) and the database holds 2,000 more of the same team for the list. Each
time: /healthz and ``GET /api/v1/workloads/?page=N`` are probed with no stream open (for
half of ``--duration``, a reference of the machine's state); one long follow is opened and
kept for ``--long`` seconds (is it cut, as sync workers' timeout cut every follow at 60 s?);
then 50 follows; then the probes again for ``--duration`` seconds. Each probe URL is sent
``--rate`` times a second, on schedule whether or not earlier ones were answered (an open
loop: a stall shows in the latencies), with a 5 s timeout (an error, counted with the time
waited). STREAMS_PER_USER is raised to 100 for the run, as one token opens every stream.

    .venv/bin/python bench/streams_bench.py [--follows 50] [--duration 20] [--rate 10]
        [--long 75] [--workers 2]

Needs Go (the simulated cluster is built once), PostgreSQL on 127.0.0.1 (role gpupaas with
CREATEDB) and redis-server. The client runs on the same machine: on a shared, loaded host
the figures are noisy; compare the two rows of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_streams"
DB_URL = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
ROWS = 2000
PROBE_TIMEOUT = 5.0

CONFIGURATIONS = {
    # name: (extra gunicorn arguments, application)
    "baseline: sync, WSGI": (["--worker-class", "sync"], "gpupaas.wsgi:application"),
    "new: uvicorn, ASGI": ([], "gpupaas.asgi:application"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", "--force", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)


def seed(kubeconfig: Path) -> tuple[str, int]:
    """A team with 2,000 workloads and one running on the simulated cluster; returns a
    member's read token and the running workload's id."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    from apps.accounts.models import Membership, Team, User
    from apps.accounts.services import api_token_create
    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import cluster_reads, services
    from apps.quotas.models import TeamQuota
    from apps.workloads import core as wl
    from apps.workloads.models import Workload

    call_command("migrate", verbosity=0)
    gpu = GpuClass.objects.create(
        name="H100-80GB", product_label="NVIDIA-H100-80GB-HBM3", memory_mib=81559,
        capacity_gpus=32,
    )  # fmt: skip
    image = Image.objects.create(name="pytorch", reference="nvcr.io/nvidia/pytorch:24.12-py3")
    team = Team.objects.create(name="Vision", slug="vision", namespace="team-vision")
    TeamQuota.objects.create(team=team, gpu_class=gpu, guaranteed_milli=8000, limit_milli=8000)
    user = User.objects.create(username="alice")
    Membership.objects.create(user=user, team=team)
    start = timezone.now()
    states = [wl.SUCCEEDED, wl.FAILED, wl.CANCELLED, wl.QUEUED]
    Workload.objects.bulk_create(
        [
            Workload(
                name=f"job-{i}", kind=wl.KIND_TRAINING, state=states[i % len(states)],
                owner=user, team=team, gpu_class=gpu, image=image, gpu_milli=1000, replicas=1,
                charged_milli=1000, priority_class=wl.PRIORITY_TRAINING,
                command=["python", "train.py"], created_at=start - timedelta(minutes=i + 1),
            )
            for i in range(ROWS)
        ]
    )  # fmt: skip
    Cluster.objects.create(name="sim", kubeconfig_path=str(kubeconfig))
    services.team_namespace_ensure(team=team)
    running = Workload.objects.create(
        name="follow-me", kind=wl.KIND_TRAINING, state=wl.ADMITTED, owner=user, team=team,
        gpu_class=gpu, image=image, gpu_milli=1000, charged_milli=1000, replicas=1,
        priority_class=wl.PRIORITY_TRAINING, command=["python", "train.py"],
        placement={"replicas": [{"node": "h100-0"}]},
        params={"pod_annotations": {"kubesim.io/run-duration": "7200s"}},
    )  # fmt: skip
    services.workload_reconcile(workload_id=running.pk)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = cluster_reads.workload_pods(running)
        if any((p.get("status") or {}).get("phase") == "Running" for p in pods):
            break
        time.sleep(0.5)
    else:
        raise SystemExit("the workload's pod did not start on the simulated cluster")
    _, token = api_token_create(actor=user, name="bench", scopes=["read"], expires_at=None)
    return token, running.pk


@dataclass
class Probe:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def percentile(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


@dataclass
class Row:
    name: str
    idle_healthz: Probe
    idle_listing: Probe
    healthz: Probe
    listing: Probe
    follows_open: int
    lines: int
    long_seconds: float
    long_end: str


async def follow(
    client: httpx.AsyncClient, url: str, counter: list[int], opened: list[int]
) -> None:
    try:
        async with client.stream("GET", url) as response:
            if response.status_code == 200:
                opened[0] += 1
            async for _ in response.aiter_lines():
                counter[0] += 1
    except (httpx.HTTPError, asyncio.CancelledError):
        pass


async def long_follow(client: httpx.AsyncClient, url: str, seconds: float) -> tuple[float, str]:
    """How long one follow stayed open (up to ``seconds``) and how it ended."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(seconds):
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    return time.monotonic() - started, f"HTTP {response.status_code}"
                async for _ in response.aiter_lines():
                    pass
        return time.monotonic() - started, "ended by the server"
    except TimeoutError:
        return time.monotonic() - started, "still open"
    except httpx.HTTPError as exc:
        return time.monotonic() - started, f"broken ({type(exc).__name__})"


async def probe(
    client: httpx.AsyncClient, url_of: object, rate: float, duration: float, result: Probe
) -> None:
    """Requests on schedule (open loop), each timed from when it was due."""

    async def one(url: str) -> None:
        started = time.perf_counter()
        try:
            response = await client.get(url, timeout=PROBE_TIMEOUT)
            if response.status_code != 200:
                result.errors += 1
        except httpx.HTTPError:
            result.errors += 1  # a timeout counts with the time waited
        result.latencies_ms.append((time.perf_counter() - started) * 1000)

    tasks = []
    begin = time.monotonic()
    n = 0
    while time.monotonic() - begin < duration:
        tasks.append(asyncio.create_task(one(url_of())))  # type: ignore[operator]
        n += 1
        await asyncio.sleep(max(0.0, begin + n / rate - time.monotonic()))
    await asyncio.gather(*tasks)


async def measure(
    name: str, base: str, token: str, workload_id: int, args: argparse.Namespace
) -> Row:
    headers = {"Authorization": f"Bearer {token}"}
    follow_url = f"{base}/api/v1/workloads/{workload_id}/logs/?tail=1&follow=true"
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(None, connect=PROBE_TIMEOUT)
    streams = httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout)
    probes = httpx.AsyncClient(headers=headers, limits=limits)
    lines, opened = [0], [0]
    pages = ROWS // 50

    async def probes_for(duration: float) -> tuple[Probe, Probe]:
        healthz, listing = Probe(), Probe()
        await asyncio.gather(
            probe(probes, lambda: f"{base}/healthz", args.rate, duration, healthz),
            probe(
                probes,
                lambda: f"{base}/api/v1/workloads/?page={random.randint(1, pages)}",  # noqa: S311
                args.rate,
                duration,
                listing,
            ),
        )
        return healthz, listing

    idle_healthz, idle_listing = await probes_for(args.duration / 2)  # no stream open: reference
    long_task = asyncio.create_task(long_follow(streams, follow_url, args.long))
    await asyncio.sleep(1)
    followers = [
        asyncio.create_task(follow(streams, follow_url, lines, opened)) for _ in range(args.follows)
    ]
    await asyncio.sleep(3)  # the streams open (or queue for a worker)
    healthz, listing = await probes_for(args.duration)
    follows_open = opened[0]
    long_seconds, long_end = await long_task
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)
    await streams.aclose()
    await probes.aclose()
    return Row(
        name, idle_healthz, idle_listing, healthz, listing, follows_open, lines[0], long_seconds,
        long_end,
    )  # fmt: skip


def wait_for(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the server did not answer at {url} within {timeout:g} s")


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--follows", type=int, default=50)
    parser.add_argument("--duration", type=float, default=20, help="seconds of probes")
    parser.add_argument("--rate", type=float, default=10, help="probes per second, each URL")
    parser.add_argument("--long", type=float, default=75, help="seconds the long follow is kept")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from deploy.devtools import kubesim

    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="gpupaas-streams-bench-"))
    redis_port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.production",
        "DATABASE_URL": DB_URL,
        "SECRET_KEY": secrets.token_urlsafe(48),
        "SECURE_SSL_REDIRECT": "false",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "API_RATE_LIMIT": "1000000/min",
        "API_RATE_LIMIT_PER_ADDRESS": "1000000/min",
        "STREAMS_PER_USER": "100",
        "LOG_LEVEL": "WARNING",
        "GPUPAAS_VAR_DIR": str(work),
    }
    os.environ.update(env)
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    rows: list[Row] = []
    try:
        with kubesim.start(work / "kubesim") as cluster:
            recreate_database()
            token, workload_id = seed(cluster.kubeconfig)
            for name, (extra, app) in CONFIGURATIONS.items():
                port = free_port()
                base = f"http://127.0.0.1:{port}"
                server = subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "gunicorn"),
                        "--config", "python:gpupaas.gunicorn_conf",
                        "--workers", str(args.workers),
                        "--bind", f"127.0.0.1:{port}",
                        "--log-level", "error",
                        *extra,
                        app,
                    ],
                    cwd=REPO_ROOT,
                    env=env,
                )  # fmt: skip
                try:
                    wait_for(f"{base}/healthz")
                    print(f"measuring {name}…", flush=True)
                    rows.append(asyncio.run(measure(name, base, token, workload_id, args)))
                finally:
                    # A graceful stop, as a deploy does: ASGI workers end their open streams after
                    # 10 s (gpupaas/workers.py); sync workers stuck in one are killed after 30 s.
                    stopping = time.monotonic()
                    server.send_signal(signal.SIGTERM)
                    try:
                        server.wait(timeout=45)
                    except subprocess.TimeoutExpired:
                        server.kill()
                        server.wait()
                    print(f"  stopped in {time.monotonic() - stopping:.1f} s", flush=True)
    finally:
        redis.terminate()
        redis.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    print()
    print(
        f"gunicorn {args.workers} workers, production settings; {args.follows} follows of one "
        f"workload on the simulated cluster (one line/s); probes: {args.rate:g}/s each for "
        f"{args.duration:g} s, open loop, {PROBE_TIMEOUT:g} s timeout (an error)"
    )
    print(
        f"{os.cpu_count()} CPUs; 1-minute load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after (other processes share these CPUs)"
    )
    print()
    header = (
        f"{'configuration':<31}{'follows':>8}{'lines':>7}"
        f"{'healthz p50':>12}{'p99':>8}{'err':>5}{'list p50':>10}{'p99':>8}{'err':>5}"
        f"  long follow"
    )
    print(header)
    for r in rows:
        print(
            f"{r.name + ', no stream':<31}{'-':>8}{'-':>7}"
            f"{fmt(r.idle_healthz.percentile(50)):>12}{fmt(r.idle_healthz.percentile(99)):>8}"
            f"{r.idle_healthz.errors:>5}"
            f"{fmt(r.idle_listing.percentile(50)):>10}{fmt(r.idle_listing.percentile(99)):>8}"
            f"{r.idle_listing.errors:>5}"
        )
        print(
            f"{r.name + ', streams':<31}{r.follows_open:>8}{r.lines:>7}"
            f"{fmt(r.healthz.percentile(50)):>12}{fmt(r.healthz.percentile(99)):>8}"
            f"{r.healthz.errors:>5}"
            f"{fmt(r.listing.percentile(50)):>10}{fmt(r.listing.percentile(99)):>8}"
            f"{r.listing.errors:>5}  {r.long_seconds:.0f} s, {r.long_end}"
        )
    if len(rows) == 2:
        old, new = rows
        for label, a, b in (
            ("healthz", old.healthz, new.healthz),
            ("list", old.listing, new.listing),
        ):
            pa, pb = a.percentile(99), b.percentile(99)
            if pa is not None and pb:
                print(f"{label} p99: baseline / new = {pa / pb:.1f}×")
            else:
                print(
                    f"{label} p99: baseline had no answer within {PROBE_TIMEOUT:g} s "
                    f"({a.errors} errors)"
                )
    print(
        "latencies in ms, requests that failed or timed out counted with the time they took; "
        "follows: streams answered 200; lines: log lines they received"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
