"""The Celery app on a real Redis, with a real worker and beat process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from apps.common import health as ops

pytestmark = [pytest.mark.redis]

ROOT = Path(__file__).resolve().parents[2]


def test_worker_and_beat_run_the_heartbeat(redis_url: str, tmp_path: Path) -> None:
    # A database of its own on the session's server, so parallel tests never share the key.
    url = redis_url.rsplit("/", 1)[0] + "/7"
    client = redis.Redis.from_url(url)
    client.delete(ops.HEARTBEAT_KEY)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.test",
        "REDIS_URL": url,
        "CELERY_BROKER_URL": url,
        "HEARTBEAT_INTERVAL_SECONDS": "1",
    }
    celery = [sys.executable, "-m", "celery", "-A", "gpupaas"]
    log = (tmp_path / "celery.log").open("w")
    proc = subprocess.Popen(
        [
            *celery,
            "worker",
            "--beat",
            "--pool=solo",
            "--loglevel=INFO",
            "--schedule",
            str(tmp_path / "beat-schedule"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while client.get(ops.HEARTBEAT_KEY) is None:
            assert proc.poll() is None, (tmp_path / "celery.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "celery.log").read_text()[-3000:]
            time.sleep(0.2)
        first = float(client.get(ops.HEARTBEAT_KEY) or 0)
        deadline = time.monotonic() + 30
        while float(client.get(ops.HEARTBEAT_KEY) or 0) == first:
            assert time.monotonic() < deadline, "beat did not schedule the heartbeat again"
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_every_task_ref_names_a_registered_task_with_its_parameters() -> None:
    import inspect

    from apps.common import taskqueue
    from gpupaas.celery import app

    app.loader.import_default_modules()
    registered = {name: task for name, task in app.tasks.items() if not name.startswith("celery.")}
    assert {ref.name for ref in taskqueue.REGISTRY} == set(registered)
    for ref in taskqueue.REGISTRY:
        params = tuple(inspect.signature(registered[ref.name].run).parameters)
        assert params == ref.params, ref.name


def test_no_module_queues_a_task_by_a_bare_string() -> None:
    import re

    pattern = re.compile(r"send_task\(|\bsignature\(\s*[\"']|\benqueue(_on_commit)?\(")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("apps", "gpupaas")
        for path in (ROOT / folder).rglob("*.py")
        if path.name != "taskqueue.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
