"""Endpoint calls through the development cluster's gateway, against the backend called directly.

One run, the same backend behind every row, an offered load of 200 requests/s (vegeta, open
loop: requests leave on schedule whether or not earlier ones have been answered):

1. direct: vegeta → the backend;
2. gateway, no auth: vegeta → Traefik → the backend, through an HTTPRoute like the
   endpoint's (the same host, prefix rewrite and Service) without the auth filter: the
   gateway's own cost;
3. gateway + auth, cached: vegeta → Traefik → the backend through the endpoint's own
   HTTPRoute and forwardAuth Middleware, as the portal writes them
   (``apps.orchestration.manifests.endpoint_manifests``); Traefik asks the real portal
   (gunicorn with its production configuration and settings, PostgreSQL, Redis) at
   ``/endpoints/auth/<id>/`` about every call, with one of the endpoint's keys in
   ``Authorization: Bearer …``; the portal remembers its "yes" per key for
   GATEWAY_AUTH_CACHE_SECONDS=5 (its default);
4. the portal's auth alone, cached: vegeta → gunicorn's ``/endpoints/auth/<id>/`` with the
   key, no gateway (what one authorisation costs the portal, over kept-alive connections);
5. gateway + auth with GATEWAY_AUTH_CACHE_SECONDS=0 (gunicorn restarted with it): the
   database is asked about every call.

vegeta keeps its connections alive (each is opened at the start of a row and reused): the hop
is measured, not the client's TCP connects. Traefik keeps its connections to the backend
alive too; its forwardAuth client, though, is Go's default transport, which keeps at most two
idle connections per host, so while more than two authorisations are in flight it connects to
the portal anew (the connections opened to the portal and to the backend during each row are
counted from /proc/net/tcp and printed). Each row follows a warm-up of a few seconds on its
path and a few seconds of quiet. For each row: the requests/s reached, p50, p99 and max
latency, what it adds to p50 and p99 over the direct row, the calls not answered 2xx, and the
CPU seconds each process spent during the row (``/proc/<pid>/stat`` utime + stime: Traefik;
the portal's gunicorn master and its workers; the backend; Redis, which the portal asks on
every call to count wrong keys; the PostgreSQL backends connected to the bench's database),
with the CPU milliseconds per request. The goal: the gateway with the portal's cached
authorisation adds under 5 ms to p99.

The cluster is kubesim (``deploy/devtools/kubesim.py``: a real API server, fake nodes) with
Traefik (``deploy/devtools/traefik.py``) serving its Gateway; the team's namespace is made by
the portal's own service, and the endpoint's Service is one without a selector whose
EndpointSlice names the backend (the fake nodes run no pods) on an address of this host
outside the loopback range, which the API server refuses in an EndpointSlice; the direct row
calls the backend on that same address. The backend is a small asyncio HTTP/1.1 server in a
process of its own, answering 200 with a short body to any path.

    .venv/bin/python bench/gateway_bench.py [--duration 15] [--rate 200] [--workers 2]

Needs Go (vegeta is built once into ~/.cache/gpupaas/bin; kubesim and Traefik are built once
into their caches when missing), PostgreSQL on 127.0.0.1 (role gpupaas with CREATEDB) and
redis-server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import api_bench
import httpx
from api_bench import Result, free_port, vegeta_binary, wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_gateway"
DB_URL = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
HOST = "serve.bench.test"
TOPOLOGY = REPO_ROOT / "deploy" / "kubesim" / "topologies" / "tiny.yaml"
CONNECTIONS = 50
WORKERS = 2
CACHE_SECONDS = 5
GOAL_ADDED_P99_MS = 5.0
CALL_PATH = "/v1/ping"
PLAIN_SUFFIX = "-plain"
DIRECT = "direct"
PLAIN = "gateway, no auth"
CACHED = f"gateway + auth, cache {CACHE_SECONDS} s"
PORTAL_ALONE = f"portal's auth alone, cache {CACHE_SECONDS} s"
UNCACHED = "gateway + auth, cache 0"
BACKEND_BODY = b"ok\n"
TICKS = os.sysconf("SC_CLK_TCK")
SIOCGIFADDR = 0x8915  # an interface's IPv4 address (Linux)


# ---------------------------------------------------------------------------------------------
# the backend: any path, 200, a short body, HTTP/1.1 keep-alive


class _Answer(asyncio.Protocol):
    """Reads requests (headers and a Content-Length body) and answers each with the same 200."""

    RESPONSE = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
        b"Content-Length: " + str(len(BACKEND_BODY)).encode() + b"\r\n\r\n" + BACKEND_BODY
    )

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip() == b"content-length":
                    length = int(value.strip() or b"0")
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.transport.write(self.RESPONSE)
            if b"\r\nconnection: close" in head:
                self.transport.close()
                return


def serve_backend(address: str, port: int) -> int:
    async def serve() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Answer, address, port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())
    return 0


def host_address() -> str:
    """An IPv4 address of this host outside the loopback range: the API server refuses a
    loopback address in an EndpointSlice. The one the host would send from (no packet is
    sent), else the first an interface holds."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))
        address = str(probe.getsockname()[0])
        if not ipaddress.ip_address(address).is_loopback:
            return address
    for _, name in socket.if_nameindex():
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = struct.pack("256s", name.encode()[:15])
            raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, packed)[20:24]
            address = socket.inet_ntoa(raw)
            if not ipaddress.ip_address(address).is_loopback:
                return address
    raise SystemExit("this host has no IPv4 address outside 127.0.0.0/8 for the EndpointSlice")


def wait_port(address: str, port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {address}:{port} after {timeout:g} s")


# ---------------------------------------------------------------------------------------------
# CPU time per process, from /proc


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of ``pid`` (all its threads), or None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def postgres_backends() -> list[int]:
    """The PostgreSQL server processes connected to the bench's database (the portal's pools),
    the bench's own connection left out."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [DB_NAME],
        )
        return [int(row[0]) for row in cursor.fetchall()]


Processes = Mapping[str, Callable[[], Iterable[int]]]


def cpu_sample(processes: Processes) -> dict[str, dict[int, float]]:
    sample: dict[str, dict[int, float]] = {}
    for name, pids in processes.items():
        sample[name] = {}
        for pid in pids():
            seconds = cpu_seconds(pid)
            if seconds is not None:
                sample[name][pid] = seconds
    return sample


def cpu_spent(
    before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]
) -> dict[str, float]:
    """CPU seconds per process group between two samples (a process that started in between
    counts from zero; one that ended in between is lost)."""
    return {
        name: sum(seconds - before.get(name, {}).get(pid, 0.0) for pid, seconds in pids.items())
        for name, pids in after.items()
    }


def peer_ports(port: int) -> set[int]:
    """The other ends' ports of the TCP sockets of this host to or from ``port``, in any state
    (TIME_WAIT included, which lasts 60 s): two samples a row apart tell the connections opened
    to ``port`` in between, whichever side closed them."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            next(handle)
            for line in handle:
                local, remote = line.split()[1:3]
                local_port, remote_port = (int(a.rpartition(":")[2], 16) for a in (local, remote))
                if remote_port == port:
                    found.add(local_port)
                elif local_port == port and remote_port:
                    found.add(remote_port)
    return found


# ---------------------------------------------------------------------------------------------
# vegeta, keep-alive


def write_targets(path: Path, url: str, key: str) -> Path:
    lines = [f"GET {url}", f"Host: {HOST}", f"Authorization: Bearer {key}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def attack(label: str, targets: Path, rate: float, duration: float) -> Result:
    """Open loop: ``rate`` requests/s on schedule over at most 50 kept-alive connections."""
    done = subprocess.run(
        [
            vegeta_binary(), "attack", f"-targets={targets}", f"-rate={round(rate)}/s",
            f"-duration={duration:g}s", "-workers=10", f"-max-workers={CONNECTIONS}",
            f"-max-connections={CONNECTIONS}", "-keepalive=true", "-http2=false",
            "-timeout=10s",
        ],
        capture_output=True, timeout=duration + 60, check=True,
    )  # fmt: skip
    report = subprocess.run(
        [vegeta_binary(), "report", "-type=json"],
        input=done.stdout, capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    data = json.loads(report.stdout)
    lat = data["latencies"]
    codes: dict[str, int] = data.get("status_codes") or {}
    ok = sum(n for code, n in codes.items() if code.startswith("2"))
    failed = int(codes.get("0", 0))
    return Result(
        label=label,
        requests=int(data["requests"]),
        seconds=float(data["duration"]) / 1e9,
        rps=float(data["throughput"]),
        p50_ms=lat["50th"] / 1e6,
        p90_ms=lat["90th"] / 1e6,
        p99_ms=lat["99th"] / 1e6,
        max_ms=lat["max"] / 1e6,
        socket_errors=failed,
        non2xx=int(data["requests"]) - ok - failed,
    )


@dataclass
class Row:
    result: Result
    cpu: dict[str, float]
    opened: dict[str, int]  # connections opened during the row, to the portal and the backend


# ---------------------------------------------------------------------------------------------
# the portal's side: team, endpoint, key, and the objects it writes for them


@dataclass
class Endpoint:
    id: int
    namespace: str
    key: str
    cluster_id: int


def seed(kubeconfig: Path) -> Endpoint:
    """A team with a guarantee, its namespace on the cluster (made by the portal's service),
    an inference endpoint submitted as the API submits it and moved on to running, and one of
    its keys."""
    import django

    django.setup()
    from django.core.management import call_command

    from apps.accounts.models import Membership, Team, User
    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.quotas.models import TeamQuota
    from apps.serving.access import endpoint_key_create
    from apps.workloads import core as wl
    from apps.workloads.request import WorkloadRequest
    from apps.workloads.services import workload_submit
    from apps.workloads.services.lifecycle import workload_transition

    call_command("migrate", verbosity=0)
    gpu = GpuClass.objects.create(
        name="H100-80GB", product_label="NVIDIA-H100-80GB-HBM3", memory_mib=81559,
        capacity_gpus=8,
    )  # fmt: skip
    image = Image.objects.create(
        name="vLLM server", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving"
    )
    team = Team.objects.create(name="Vision", slug="vision", namespace="team-vision")
    TeamQuota.objects.create(team=team, gpu_class=gpu, guaranteed_milli=8000, limit_milli=8000)
    lead = User.objects.create(username="lead")
    Membership.objects.create(user=lead, team=team, role=Membership.Role.LEAD)
    cluster = Cluster.objects.create(name="bench", kubeconfig_path=str(kubeconfig))
    services.team_namespace_ensure(team=team, clusters=[cluster])
    workload = workload_submit(
        actor=lead,
        team=team,
        gpu_class=gpu,
        image=image,
        request=WorkloadRequest.of(
            kind=wl.KIND_INFERENCE,
            name="llm",
            gpu_milli=1000,
            endpoint={"model_path": "/team/models/llama", "max_replicas": 2},
        ),
    )
    # The scheduler and the reconcile are not running: the endpoint is moved to running as
    # they would move it.
    for state in (wl.QUEUED, wl.ADMITTED, wl.RUNNING):
        if not workload_transition(workload=workload, to_state=state, reason="bench"):
            raise SystemExit(f"the endpoint could not be moved to {state}")
    workload.cluster = cluster
    workload.save(update_fields=["cluster"])
    created = endpoint_key_create(actor=lead, workload=workload, name="bench")
    return Endpoint(workload.pk, team.namespace, created.plaintext, cluster.pk)


def route_objects(endpoint: Endpoint, address: str, port: int) -> list[dict[str, Any]]:
    """The endpoint's HTTPRoute and Middleware as the portal writes them; its Service without a
    selector and an EndpointSlice naming the backend; and the same route under another prefix
    without the auth filter (the gateway alone)."""
    from apps.orchestration import manifests as m
    from apps.orchestration.selectors import workload_spec
    from apps.workloads.models import Workload

    written = m.endpoint_manifests(workload_spec(Workload.objects.get(pk=endpoint.id)))
    by_kind = {doc["kind"]: doc for doc in written}
    missing = {"HTTPRoute", "Middleware", "Service"} - by_kind.keys()
    if missing:
        raise SystemExit(f"the endpoint's manifests lack {sorted(missing)} (TRAFFIC_API?)")
    route, service = by_kind["HTTPRoute"], copy.deepcopy(by_kind["Service"])
    service["spec"].pop("selector", None)
    name = service["metadata"]["name"]
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-bench",
            "namespace": endpoint.namespace,
            "labels": {
                **service["metadata"].get("labels", {}),
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": "gateway-bench",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [
            {"name": each.get("name"), "port": port, "protocol": "TCP"}
            for each in service["spec"]["ports"]
        ],
    }
    plain = copy.deepcopy(route)
    plain["metadata"]["name"] += PLAIN_SUFFIX
    for rule in plain["spec"]["rules"]:
        rule["filters"] = [f for f in rule["filters"] if f["type"] == "URLRewrite"]
        for match in rule["matches"]:
            match["path"]["value"] = plain_prefix(match["path"]["value"])
    return [service, slice_, by_kind["Middleware"], route, plain]


def plain_prefix(prefix: str) -> str:
    return "/plain" + prefix


def apply_routes(endpoint: Endpoint, objects: list[dict[str, Any]], kubeconfig: Path) -> None:
    from kubernetes import config

    from apps.catalog.models import Cluster
    from apps.orchestration.clusters import kube_for
    from deploy.devtools import traefik

    kube = kube_for(Cluster.objects.get(pk=endpoint.cluster_id))
    for doc in objects:
        kube.apply(doc, workload_id=endpoint.id)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        routes = [d["metadata"]["name"] for d in objects if d["kind"] == "HTTPRoute"]
        deadline = time.monotonic() + 60
        while not all(
            traefik.route_conditions(api_client, endpoint.namespace, r).get("Accepted") == "True"
            for r in routes
        ):
            if time.monotonic() > deadline:
                raise SystemExit(f"Traefik did not accept the routes {routes} within 60 s")
            time.sleep(0.3)
    finally:
        api_client.close()


def start_gunicorn(env: dict[str, str], port: int, workers: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "--config", "python:gpupaas.gunicorn_conf",
            "--workers", str(workers),
            "--bind", f"127.0.0.1:{port}",
            "--log-level", "warning",
            "gpupaas.asgi:application",
        ],
        cwd=REPO_ROOT,
        env=env,
    )  # fmt: skip
    wait_for(f"http://127.0.0.1:{port}/healthz")
    return process


def stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def check_gateway(gateway: str, path: str, key: str, timeout: float = 30.0) -> None:
    """One call with the key must pass (200) and one without must be refused (401); Traefik
    may need a moment after accepting a route before it serves it."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=gateway, headers={"Host": HOST}, timeout=10) as web:
        while True:
            keyed = web.get(path, headers={"Authorization": f"Bearer {key}"})
            if keyed.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        bare = web.get(path)
    if keyed.status_code != 200 or keyed.content != BACKEND_BODY:
        raise SystemExit(f"{path} with the key: {keyed.status_code} {keyed.text[:200]!r}")
    if bare.status_code != 401:
        raise SystemExit(f"{path} without a key: {bare.status_code}, not 401 {bare.text[:200]!r}")


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=15, help="seconds per row")
    parser.add_argument("--rate", type=float, default=200.0, help="offered load, requests/s")
    parser.add_argument("--workers", type=int, default=WORKERS, help="gunicorn workers")
    parser.add_argument("--settle", type=float, default=3.0, help="quiet seconds before a row")
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds per row")
    parser.add_argument("--serve-backend", metavar="ADDRESS:PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_backend:
        address, _, port = args.serve_backend.rpartition(":")
        return serve_backend(address, int(port))
    vegeta_binary()

    from deploy.devtools import kubesim as ks
    from deploy.devtools import traefik

    started = time.monotonic()
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="gpupaas-gateway-bench-"))
    (work / "static").mkdir()  # STATIC_ROOT under GPUPAAS_VAR_DIR: nothing is served from it
    redis_port, portal_port, backend_port, gateway_port = (free_port() for _ in range(4))
    backend_address = host_address()
    backend_url = f"http://{backend_address}:{backend_port}"
    portal = f"http://127.0.0.1:{portal_port}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.production",
        "DATABASE_URL": DB_URL,
        "SECRET_KEY": secrets.token_urlsafe(48),
        "SECURE_SSL_REDIRECT": "false",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "API_RATE_LIMIT": "1000000/min",
        "API_RATE_LIMIT_PER_ADDRESS": "1000000/min",
        "LOG_LEVEL": "WARNING",
        "GPUPAAS_VAR_DIR": str(work),
        "ALLOWED_HOSTS": f"127.0.0.1,localhost,{HOST}",
        "PORTAL_URL": portal,
        "ENDPOINT_HOST": f"http://{HOST}:{gateway_port}",
        "ENDPOINT_AUTH_URL": f"{portal}/endpoints/auth/",
        "TRAFFIC_API": "gateway-api",
        "GATEWAY_IMPLEMENTATION": "traefik",
        "TRUSTED_PROXY_COUNT": "1",  # the portal behind Traefik
        "ENDPOINT_KEY_GUESSES": "1000000",
        "GATEWAY_AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
    }
    os.environ.update(env)
    api_bench.DB_NAME = DB_NAME
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    backend = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-backend", backend_url[7:]]
    )
    cluster: Any = None
    proxy: Any = None
    gunicorn: subprocess.Popen[bytes] | None = None
    rows: list[Row] = []
    try:
        api_bench.recreate_database()
        cluster = ks.start(work / "kubesim", topology=TOPOLOGY)
        kubeconfig = cluster.data_dir / "admin.kubeconfig"
        proxy = traefik.start(kubeconfig, work / "traefik", port=gateway_port)
        endpoint = seed(kubeconfig)
        apply_routes(endpoint, route_objects(endpoint, backend_address, backend_port), kubeconfig)
        from django.db import connections

        connections.close_all()
        wait_port(backend_address, backend_port)
        gunicorn = start_gunicorn(env, portal_port, args.workers)
        prefix = f"/endpoints/{endpoint.namespace}/{endpoint.id}"
        gateway = f"http://127.0.0.1:{gateway_port}"
        check_gateway(gateway, prefix + CALL_PATH, endpoint.key)
        print(f"ready in {time.monotonic() - started:.0f} s: kubesim, Traefik, portal, backend")

        def portal_pids() -> list[int]:
            assert gunicorn is not None
            return [gunicorn.pid, *children_of(gunicorn.pid)]

        processes: Processes = {
            "traefik": lambda: [proxy.process.pid],
            "portal": portal_pids,
            "backend": lambda: [backend.pid],
            "redis": lambda: [redis.pid],
            "postgres": postgres_backends,
        }
        targets = {
            "direct": write_targets(work / "direct.txt", backend_url + CALL_PATH, endpoint.key),
            "plain": write_targets(
                work / "plain.txt", gateway + plain_prefix(prefix) + CALL_PATH, endpoint.key
            ),
            "auth": write_targets(work / "auth.txt", gateway + prefix + CALL_PATH, endpoint.key),
            "portal": write_targets(
                work / "portal.txt", f"{portal}/endpoints/auth/{endpoint.id}/", endpoint.key
            ),
        }

        ports = {"portal": portal_port, "backend": backend_port}

        def row(label: str, target: str) -> None:
            attack("warm-up", targets[target], args.rate, args.warmup)
            time.sleep(args.settle)
            before, peers = cpu_sample(processes), {k: peer_ports(p) for k, p in ports.items()}
            result = attack(label, targets[target], args.rate, args.duration)
            cpu = cpu_spent(before, cpu_sample(processes))
            opened = {k: len(peer_ports(p) - peers[k]) for k, p in ports.items()}
            rows.append(Row(result, cpu, opened))

        row(DIRECT, "direct")
        row(PLAIN, "plain")
        row(CACHED, "auth")
        row(PORTAL_ALONE, "portal")
        stop(gunicorn)
        uncached = {**env, "GATEWAY_AUTH_CACHE_SECONDS": "0"}
        gunicorn = start_gunicorn(uncached, portal_port, args.workers)
        check_gateway(gateway, prefix + CALL_PATH, endpoint.key)
        row(UNCACHED, "auth")
    finally:
        stop(gunicorn)
        if proxy is not None:
            proxy.stop()
        if cluster is not None:
            cluster.stop()
        for process in (backend, redis):
            stop(process)
        shutil.rmtree(work, ignore_errors=True)
    report(rows, args, load_before, time.monotonic() - started)
    return 0


def report(rows: list[Row], args: argparse.Namespace, load_before: float, took: float) -> None:
    from deploy.devtools import traefik

    by_label = {row.result.label: row for row in rows}
    direct = by_label[DIRECT].result
    names = list(rows[0].cpu)
    print()
    print(
        f"vegeta, open loop, {args.rate:g} requests/s offered, ≤ {CONNECTIONS} kept-alive "
        f"connections; {args.duration} s per row after {args.warmup:g} s of warm-up and "
        f"{args.settle:g} s of quiet; Traefik {traefik.TRAEFIK_VERSION}; gunicorn "
        f"{args.workers} uvicorn workers, production settings; {os.cpu_count()} CPUs"
    )
    print(
        f"1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        f"(other processes share these CPUs; kubesim's control plane runs beside); "
        f"whole run {took:.0f} s"
    )
    print()
    print(
        f"{'row':<34}{'req/s':>7}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
        f"{'+p50 ms':>9}{'+p99 ms':>9}{'non-2xx':>8}{'errors':>7}"
    )
    for r in (row.result for row in rows):
        print(
            f"{r.label:<34}{r.rps:>7.1f}{r.p50_ms:>8.2f}{r.p99_ms:>8.2f}{r.max_ms:>8.1f}"
            f"{r.p50_ms - direct.p50_ms:>9.2f}{r.p99_ms - direct.p99_ms:>9.2f}"
            f"{r.non2xx:>8}{r.socket_errors:>7}"
        )
    print()
    print("CPU seconds spent during each row, CPU ms per request (all these processes), and the")
    print("TCP connections opened during the row to the portal and to the backend:")
    print(
        f"{'row':<34}"
        + "".join(f"{n:>9}" for n in names)
        + f"{'ms/req':>8}{'+ms/req':>8}{'→portal':>8}{'→backend':>9}"
    )
    base = sum(by_label[DIRECT].cpu.values()) * 1000 / max(1, direct.requests)
    for row in rows:
        per_request = sum(row.cpu.values()) * 1000 / max(1, row.result.requests)
        print(
            f"{row.result.label:<34}"
            + "".join(f"{row.cpu[n]:>9.2f}" for n in names)
            + f"{per_request:>8.2f}{per_request - base:>8.2f}"
            + f"{row.opened['portal']:>8}{row.opened['backend']:>9}"
        )
    print("(portal: gunicorn's master and workers; postgres: the backends of the portal's pools)")
    cached = by_label[CACHED].result
    added = cached.p99_ms - direct.p99_ms
    met = (
        added < GOAL_ADDED_P99_MS
        and cached.rps >= 0.95 * args.rate
        and cached.non2xx + cached.socket_errors == 0
    )
    print()
    print(
        f"goal: the gateway with the portal's cached authorisation adds < {GOAL_ADDED_P99_MS:g} "
        f"ms to p99 at {args.rate:g} requests/s → {'met' if met else 'NOT met'} (+{added:.2f} ms: "
        f"p99 {cached.p99_ms:.2f} ms against {direct.p99_ms:.2f} ms direct, "
        f"{cached.rps:.0f} requests/s, {cached.non2xx + cached.socket_errors} not 2xx)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
