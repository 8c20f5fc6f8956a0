"""REST API under load: gunicorn on two cores with PostgreSQL, 50 concurrent clients.

The database holds 10,000 workloads of one team. One member's write token is used for:

* list   GET  /api/v1/workloads/?page=N  (pages of 50, N over all 200 pages in random order)
* submit POST /api/v1/workloads/          (a one-GPU training job; each request creates one)

Each is measured two ways, after a few seconds of quiet:

* saturated: wrk, closed loop, 50 connections sending as fast as answers come back — the most
  the server does;
* paced: vegeta, open loop, a constant offered rate (default 200 requests/s) over at most 50
  connections. Requests leave on schedule whether or not earlier ones have been answered, so
  a stall shows in the latencies instead of silently lowering the load, and each request
  connects when it is sent (as real clients do). The list is also paced at 80% of the rate it
  reached saturated.

Baseline in the same run: /healthz (no database, no authentication), saturated and paced.
gunicorn runs with the production settings module and its production configuration
(``gpupaas/gunicorn_conf.py``: uvicorn workers, heartbeat in /dev/shm, the loaded application
frozen out of the garbage collector); the rate limit is set out of reach for the run (one
token sends everything) but still counted in Redis, as production does.

    .venv/bin/python bench/api_bench.py [--rows 10000] [--duration 15] [--rate 200] [--workers 2]
                                        [--server asgi|wsgi]

``--server wsgi`` runs the same rows on gunicorn's sync workers over ``gpupaas.wsgi`` (the
configuration production used before log streams moved it to ASGI; persistent connections,
no pool), for a comparison of the two on the same machine.

Needs wrk (apt-get install wrk), Go (vegeta is built once into ~/.cache/gpupaas/bin from the
Go module proxy), PostgreSQL on 127.0.0.1 (role gpupaas with CREATEDB) and redis-server
(started here on a free port, for the tasks a submit queues).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_api"
DB_URL = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
CONNECTIONS = 50
RANDOM_PAGE_COST = 1.1
THREADS = 2
WORKERS = 2

WRK_SCRIPT = r"""
local token = os.getenv("BENCH_TOKEN")
local mode = os.getenv("BENCH_MODE")            -- list | submit | healthz
local pages = tonumber(os.getenv("BENCH_PAGES") or "1")
local body = os.getenv("BENCH_BODY") or ""

function init(args)
  math.randomseed(os.time() * 1000 + math.floor(os.clock() * 1e6))
end

function request()
  local headers = {["Authorization"] = "Bearer " .. token, ["Accept"] = "application/json"}
  if mode == "list" then
    local page = math.random(1, pages)
    return wrk.format("GET", "/api/v1/workloads/?page=" .. page .. "&page_size=50", headers)
  elseif mode == "submit" then
    headers["Content-Type"] = "application/json"
    return wrk.format("POST", "/api/v1/workloads/", headers, body)
  end
  return wrk.format("GET", "/healthz", {})
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  io.write(string.format(
    'BENCH_JSON {"requests": %d, "seconds": %.3f, "rps": %.1f, "p50_ms": %.2f, '
    .. '"p90_ms": %.2f, "p99_ms": %.2f, "max_ms": %.2f, "socket_errors": %d, "non2xx": %d}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.connect + summary.errors.read + summary.errors.write
      + summary.errors.timeout, summary.errors.status))
end
"""


@dataclass
class Result:
    label: str
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    socket_errors: int
    non2xx: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", "--force", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)
    # Planner costs for data in memory or on SSD, as any PostgreSQL serving this should have
    # (the stock random_page_cost of 4 is for spinning disks): with it, counting a team's
    # workloads reads the live-workload index instead of every row of the table.
    subprocess.run(
        ["psql", *base, "-d", DB_NAME, "-qc",
         f"ALTER DATABASE {DB_NAME} SET random_page_cost = {RANDOM_PAGE_COST}"],
        check=True, env=env,
    )  # fmt: skip


def seed(rows: int) -> tuple[str, dict[str, object]]:
    """10,000 workloads of one team; returns a member's write token and a submit body."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from apps.accounts.models import Membership, Team, User
    from apps.accounts.services import api_token_create
    from apps.catalog.models import GpuClass, Image
    from apps.quotas.models import TeamQuota
    from apps.workloads import core as wl
    from apps.workloads.models import Workload

    call_command("migrate", verbosity=0)
    gpu = GpuClass.objects.create(
        name="H100-80GB", product_label="NVIDIA-H100-80GB-HBM3", memory_mib=81559,
        capacity_gpus=512,
    )  # fmt: skip
    image = Image.objects.create(name="pytorch", reference="nvcr.io/nvidia/pytorch:24.12-py3")
    team = Team.objects.create(name="Vision", slug="vision", namespace="team-vision")
    other = Team.objects.create(name="NLP", slug="nlp", namespace="team-nlp")
    TeamQuota.objects.create(team=team, gpu_class=gpu, guaranteed_milli=64000, limit_milli=128000)
    users = [User.objects.create(username=f"user{i}") for i in range(20)]
    for user in users:
        Membership.objects.create(user=user, team=team)
    outsider = User.objects.create(username="outsider")
    Membership.objects.create(user=outsider, team=other)
    states = [wl.SUCCEEDED, wl.FAILED, wl.CANCELLED, wl.RUNNING, wl.QUEUED, wl.PENDING]
    start = timezone.now()
    Workload.objects.bulk_create(
        [
            Workload(
                name=f"job-{i}",
                kind=wl.KIND_TRAINING,
                state=states[i % len(states)],
                owner=users[i % len(users)],
                team=team,
                gpu_class=gpu,
                image=image,
                gpu_milli=1000,
                charged_milli=1000,
                replicas=1,
                priority_class=wl.PRIORITY_TRAINING,
                command=["python", "train.py", f"--seed={i}"],
                env={"RUN": str(i)},
                created_at=start - timedelta(minutes=i),
            )
            for i in range(rows)
        ],
        batch_size=2000,
    )
    with connection.cursor() as cursor:
        # As autovacuum leaves a table in use: statistics fresh and the visibility map set,
        # so that index-only scans need not visit the rows just loaded.
        cursor.execute("VACUUM ANALYZE")
    _, token = api_token_create(actor=users[0], name="bench", scopes=["write"], expires_at=None)
    body = {
        "kind": "training",
        "name": "bench-submit",
        "gpu_class": gpu.name,
        "image": image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
    }
    return token, body


def wait_for(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"gunicorn did not answer at {url} within {timeout:g} s")


def run_wrk(label: str, url: str, script: Path, duration: int, env: dict[str, str]) -> Result:
    """Closed loop: 50 connections, each sending its next request when the answer is in."""
    cmd = [
        "wrk", f"-t{THREADS}", f"-c{CONNECTIONS}", f"-d{duration}s", "--timeout", "10s",
        "-s", str(script), url,
    ]  # fmt: skip
    done = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=duration + 60, check=True
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("BENCH_JSON "))
    return Result(label=label, **json.loads(line.removeprefix("BENCH_JSON ")))


VEGETA_VERSION = "v12.13.0"


def vegeta_binary() -> str:
    """vegeta from PATH, or built once from the Go module proxy into the project's cache."""
    found = shutil.which("vegeta")
    if found:
        return found
    bin_dir = Path.home() / ".cache" / "gpupaas" / "bin"
    binary = bin_dir / "vegeta"
    if not binary.exists():
        if shutil.which("go") is None:
            raise SystemExit("vegeta is not installed and Go is not there to build it.")
        print(f"building vegeta {VEGETA_VERSION} into {bin_dir} (once)…", flush=True)
        subprocess.run(
            ["go", "install", f"github.com/tsenart/vegeta/v12@{VEGETA_VERSION}"],
            env={**os.environ, "GOBIN": str(bin_dir)},
            check=True,
            timeout=600,
        )
    return str(binary)


def write_targets(work: Path, base: str, mode: str, token: str, pages: int, body: str) -> Path:
    """vegeta's targets: every list page once in random order, or the submit, or healthz."""
    auth = [f"Authorization: Bearer {token}", "Accept: application/json"]
    blocks: list[list[str]] = []
    if mode == "list":
        order = list(range(1, pages + 1))
        random.shuffle(order)
        blocks = [[f"GET {base}/api/v1/workloads/?page={n}&page_size=50", *auth] for n in order]
    elif mode == "submit":
        (work / "submit.json").write_text(body)
        blocks = [
            [f"POST {base}/api/v1/workloads/", *auth, "Content-Type: application/json",
             f"@{work / 'submit.json'}"]
        ]  # fmt: skip
    else:
        blocks = [[f"GET {base}/healthz"]]
    path = work / f"targets-{mode}.txt"
    path.write_text("\n\n".join("\n".join(block) for block in blocks) + "\n")
    return path


def run_vegeta(label: str, targets: Path, rate: float, duration: int) -> Result:
    """Open loop: ``rate`` requests/s on schedule, over at most 50 connections."""
    attack = subprocess.run(
        [
            vegeta_binary(), "attack", f"-targets={targets}", f"-rate={round(rate)}/s",
            f"-duration={duration}s", f"-workers={CONNECTIONS}",
            f"-max-workers={CONNECTIONS}", "-keepalive=false", "-timeout=10s",
        ],
        capture_output=True, timeout=duration + 60, check=True,
    )  # fmt: skip
    report = subprocess.run(
        [vegeta_binary(), "report", "-type=json"],
        input=attack.stdout, capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    data = json.loads(report.stdout)
    lat = data["latencies"]
    codes: dict[str, int] = data.get("status_codes") or {}
    ok = sum(n for code, n in codes.items() if code.startswith("2"))
    return Result(
        label=label,
        requests=int(data["requests"]),
        seconds=float(data["duration"]) / 1e9,
        rps=float(data["throughput"]),
        p50_ms=lat["50th"] / 1e6,
        p90_ms=lat["90th"] / 1e6,
        p99_ms=lat["99th"] / 1e6,
        max_ms=lat["max"] / 1e6,
        socket_errors=int(codes.get("0", 0)),
        non2xx=int(data["requests"]) - ok - int(codes.get("0", 0)),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--duration", type=int, default=15, help="seconds per measurement")
    parser.add_argument("--rate", type=float, default=200.0, help="paced offered load, req/s")
    parser.add_argument("--workers", type=int, default=WORKERS, help="gunicorn workers")
    parser.add_argument("--settle", type=float, default=3.0, help="quiet seconds between rows")
    parser.add_argument(
        "--server", choices=("asgi", "wsgi"), default="asgi", help="production's ASGI, or sync"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (apt-get install wrk).")
    vegeta_binary()

    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="gpupaas-api-bench-"))
    redis_port = free_port()
    secret = secrets.token_urlsafe(48)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.production",
        "DATABASE_URL": DB_URL,
        "SECRET_KEY": secret,
        "SECURE_SSL_REDIRECT": "false",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "API_RATE_LIMIT": "1000000/min",
        "API_RATE_LIMIT_PER_ADDRESS": "1000000/min",
        "LOG_LEVEL": "WARNING",
        "GPUPAAS_VAR_DIR": str(work),
    }
    os.environ.update(env)
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    gunicorn: subprocess.Popen[bytes] | None = None
    try:
        recreate_database()
        mark = time.perf_counter()
        token, body = seed(args.rows)
        print(f"seeded {args.rows} workloads in {time.perf_counter() - mark:.1f} s")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server_args = (
            ["gpupaas.asgi:application"]
            if args.server == "asgi"
            else ["--worker-class", "sync", "gpupaas.wsgi:application"]
        )
        server_env = (
            env
            if args.server == "asgi"
            else {**env, "DATABASE_CONN_MAX_AGE": "60", "DATABASE_POOL_SIZE": "0"}
        )
        gunicorn = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "--config", "python:gpupaas.gunicorn_conf",
                "--workers", str(args.workers),
                "--bind", f"127.0.0.1:{port}",
                "--log-level", "warning",
                *server_args,
            ],
            cwd=REPO_ROOT,
            env=server_env,
        )  # fmt: skip
        wait_for(f"{base}/healthz")
        script = work / "bench.lua"
        script.write_text(WRK_SCRIPT)
        pages = max(1, args.rows // 50)
        body_text = json.dumps(body)
        wrk_env = {**env, "BENCH_TOKEN": token, "BENCH_PAGES": str(pages), "BENCH_BODY": body_text}
        targets = {
            mode: write_targets(work, base, mode, token, pages, body_text)
            for mode in ("healthz", "list", "submit")
        }

        def saturated(label: str, mode: str) -> Result:
            time.sleep(args.settle)
            return run_wrk(label, base, script, args.duration, {**wrk_env, "BENCH_MODE": mode})

        def paced(label: str, mode: str, rate: float) -> Result:
            time.sleep(args.settle)
            return run_vegeta(label, targets[mode], rate, args.duration)

        # Warm both workers (imports, connections, prepared statements) before measuring.
        run_wrk("warm-up", base, script, 3, {**wrk_env, "BENCH_MODE": "list"})
        results = [
            saturated("healthz, saturated", "healthz"),
            paced(f"healthz, paced {args.rate:g}/s", "healthz", args.rate),
        ]
        list_max = saturated("list, saturated", "list")
        target_row = paced(f"list, paced {args.rate:g}/s", "list", args.rate)
        sustainable = round(0.8 * list_max.rps)
        results += [
            list_max,
            target_row,
            paced(f"list, paced {sustainable}/s (80%)", "list", sustainable),
        ]
        submit_max = saturated("submit, saturated", "submit")
        results += [
            submit_max,
            paced(f"submit, paced {args.rate:g}/s", "submit", args.rate),
            paced(
                f"submit, paced {round(0.8 * submit_max.rps)}/s (80%)",
                "submit",
                round(0.8 * submit_max.rps),
            ),
        ]
    finally:
        if gunicorn is not None:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
        redis.terminate()
        redis.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    healthz = results[0].rps
    print()
    print(
        f"gunicorn {args.workers} "
        f"{'uvicorn workers (ASGI)' if args.server == 'asgi' else 'sync workers (WSGI)'}; "
        f"saturated rows: wrk {THREADS} threads × "
        f"{CONNECTIONS} connections; paced rows: vegeta, open loop, ≤ {CONNECTIONS} connections"
    )
    print(f"{args.rows} workloads, pages of 50, {args.duration} s per row, {os.cpu_count()} CPUs")
    print(
        f"1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        "(other processes share these CPUs; compare rows through the healthz column)"
    )
    print()
    header = f"{'measurement':<32}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    print(header + f"{'errors':>8}{'vs healthz':>12}")
    for r in results:
        errors = r.socket_errors + r.non2xx
        print(
            f"{r.label:<32}{r.rps:>9.1f}{r.p50_ms:>9.1f}{r.p90_ms:>9.1f}{r.p99_ms:>9.1f}"
            f"{r.max_ms:>9.0f}{errors:>8}{r.rps / healthz:>11.2f}×"
        )
    ok = (
        target_row.p99_ms < 100
        and target_row.rps >= 0.95 * args.rate
        and target_row.socket_errors + target_row.non2xx == 0
    )
    print()
    print(
        f"target: list p99 < 100 ms at {args.rate:g} req/s → "
        f"{'met' if ok else 'NOT met'} (p99 {target_row.p99_ms:.1f} ms at "
        f"{target_row.rps:.0f} req/s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
