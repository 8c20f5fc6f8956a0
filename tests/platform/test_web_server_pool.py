"""The production web server (gunicorn with uvicorn workers, gpupaas/gunicorn_conf.py, the
production settings) against the test run's PostgreSQL: each request's synchronous code runs
on a thread of its own under ASGI, and database connections come from a pool per worker, so a
burst of requests opens a handful of PostgreSQL sessions, not one per request."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.serving.access import endpoint_key_create
from apps.serving.models import EndpointKey
from apps.workloads import core
from gpupaas.settings.base import database_from_url
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast
from tests.plugins.redis_server import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
POOL = 3
REQUESTS = 60
REMEMBERED_SECONDS = 2


def test_a_pool_size_gives_each_process_a_pool_and_no_persistent_connections() -> None:
    url = "postgres://u:p@127.0.0.1:5432/db"
    pooled = database_from_url(url, conn_max_age=60, pool_size=8)
    assert pooled["CONN_MAX_AGE"] == 0
    assert pooled["OPTIONS"]["pool"] == {
        "min_size": 0,
        "max_size": 8,
        "timeout": 10,
        "reconnect_timeout": 0,
    }
    plain = database_from_url(url, conn_max_age=60)
    assert plain["CONN_MAX_AGE"] == 60
    assert "pool" not in plain.get("OPTIONS", {})


def sessions_opened(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", [name])
        return int(cursor.fetchone()[0])


def server_backends(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        return int(cursor.fetchone()[0])


@pytest.fixture
def web_server(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[str]:
    db = settings.DATABASES["default"]
    if db["ENGINE"] != "apps.common.db.postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL): the pool is PostgreSQL's")
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.production",
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "DATABASE_POOL_SIZE": str(POOL),
        "SECRET_KEY": secrets.token_urlsafe(48),
        "SECURE_SSL_REDIRECT": "false",
        "REDIS_URL": redis_url,
        "API_AUTH_FAILURE_LIMIT": "1000/min",
        "GATEWAY_AUTH_CACHE_SECONDS": str(REMEMBERED_SECONDS),
        "LOG_LEVEL": "WARNING",
        "GPUPAAS_VAR_DIR": str(tmp_path),
    }
    env.pop("DATABASE_CONN_MAX_AGE", None)
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "--config",
            "python:gpupaas.gunicorn_conf",
            "--workers",
            "1",
            "--bind",
            f"127.0.0.1:{port}",
            "gpupaas.asgi:application",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("the web server did not answer /healthz within 60 s")
        time.sleep(0.2)
    try:
        yield base
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_a_burst_of_requests_shares_a_few_pooled_connections(web_server: str) -> None:
    name = settings.DATABASES["default"]["NAME"]

    def call(n: int) -> int:
        # A token that does not exist: the lookup reads the database, the answer is a 401.
        headers = {"Authorization": f"Bearer gpp_00000000_{n:040d}"}
        return httpx.get(f"{web_server}/api/v1/workloads/", headers=headers, timeout=30).status_code

    before = sessions_opened(name)
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(call, range(REQUESTS)))
    assert answers == [401] * REQUESTS
    opened = sessions_opened(name) - before
    assert 1 <= opened <= POOL, f"{opened} PostgreSQL sessions for {REQUESTS} requests"
    assert server_backends(name) <= POOL


def test_the_gateways_auth_hooks_share_the_same_few_pooled_connections(web_server: str) -> None:
    """The auth hooks are served by Django's WSGI handler on threads of their own
    (gpupaas/asgi.py): the same answers, and the same process pool of connections."""
    name = settings.DATABASES["default"]["NAME"]

    def call(n: int) -> httpx.Response:
        # A key for an endpoint that does not exist: the lookup reads the database.
        headers = {
            "Authorization": f"Bearer gpe_{n:08d}_{n:040d}",
            "X-Forwarded-For": f"10.0.{n}.1",
        }
        return httpx.get(f"{web_server}/endpoints/auth/{n + 1}/", headers=headers, timeout=30)

    before = sessions_opened(name)
    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(call, range(REQUESTS)))
    assert {a.status_code for a in answers} == {401}
    assert {a.text for a in answers} == {"That key does not open this endpoint (wrong or revoked)."}
    assert all("no-store" in a.headers["Cache-Control"] for a in answers)
    opened = sessions_opened(name) - before
    assert 1 <= opened <= POOL, f"{opened} PostgreSQL sessions for {REQUESTS} requests"
    assert server_backends(name) <= POOL
    # The hooks carry the portal's own headers as its other answers do (same middleware).
    notebook = httpx.get(f"{web_server}/notebooks/auth/1/", timeout=30)
    assert notebook.status_code == 403
    assert notebook.headers["X-Content-Type-Options"] == "nosniff"


def test_a_remembered_key_is_answered_by_the_server_and_stops_within_the_cache_time(
    web_server: str, cast: Cast
) -> None:
    """The server answers a key it said "yes" to from memory (before Django, on the event loop)
    with the same answer; a key revoked elsewhere (here: in the test's process) stops within
    GATEWAY_AUTH_CACHE_SECONDS."""
    workload = WorkloadFactory.create(
        kind=core.KIND_INFERENCE,
        owner=cast.lead,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
    )
    key = endpoint_key_create(actor=cast.lead, workload=workload, name="app").plaintext
    url = f"{web_server}/endpoints/auth/{workload.pk}/"
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(timeout=30) as web:
        answers = [web.get(url, headers=headers) for _ in range(20)]
        assert {(a.status_code, a.text) for a in answers} == {(200, "ok")}
        assert all("no-store" in a.headers["Cache-Control"] for a in answers)
        # The first was decided by Django (its response middleware's headers), the rest came
        # from the process's memory before Django.
        assert "X-Frame-Options" in answers[0].headers
        assert all("X-Frame-Options" not in a.headers for a in answers[1:])
        EndpointKey.objects.filter(endpoint_id=workload.pk).update(revoked_at=timezone.now())
        revoked = time.monotonic()
        while (answer := web.get(url, headers=headers)).status_code == 200:
            assert time.monotonic() - revoked < REMEMBERED_SECONDS + 1, "still let through"
            time.sleep(0.05)
        assert answer.status_code == 401
        assert answer.text == "That key does not open this endpoint (wrong or revoked)."


def test_a_stream_gives_its_requests_connection_back_but_never_inside_a_transaction(
    transactional_db: None,
) -> None:
    """Once a view has returned a stream, the request's thread gives its connection back (to
    the pool), so an open stream holds none; inside a transaction it keeps it."""
    from django.db import transaction

    from apps.common.streams import release_connections

    def on_a_request_thread() -> tuple[bool, bool]:
        connection.ensure_connection()
        opened = connection.connection is not None
        release_connections()
        released = connection.connection is None
        connection.close()
        return opened, released

    with ThreadPoolExecutor(max_workers=1) as thread:
        assert thread.submit(on_a_request_thread).result() == (True, True)
    with transaction.atomic():
        connection.ensure_connection()
        release_connections()
        assert connection.connection is not None
