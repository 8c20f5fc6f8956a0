"""The README's run command, started and stopped as a person does: it answers on its port,
and Ctrl-C (SIGINT to its process group) or a SIGTERM stops everything it started, the Redis
it started included (the cluster is left out: KUBESIM=0)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.plugins.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 240.0


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
            return bool(answer.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


def _redis_answers(port: int) -> bool:
    result = subprocess.run(
        ["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() == "PONG"


def _group_alive(pgid: int) -> list[str]:
    """The processes still in the process group, as ``pid command``."""
    out = subprocess.run(
        ["ps", "-o", "pid=,pgid=,args=", "-e"], capture_output=True, text=True, check=True
    ).stdout
    alive = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[1] == str(pgid):
            alive.append(f"{parts[0]} {parts[2] if len(parts) > 2 else ''}")
    return alive


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_run_command_serves_the_portal_and_stopping_it_stops_everything_it_started(
    tmp_path: Path, stop: signal.Signals
) -> None:
    port, redis_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DATABASE_", "REDIS_", "DJANGO_", "GPUPAAS_", "PYTEST_"))
    }
    env.update(
        KUBESIM="0",
        OIDC="0",
        PORT=str(port),
        REDIS_PORT=str(redis_port),
        GPUPAAS_VAR_DIR=str(tmp_path / "var"),
    )
    output = tmp_path / "run.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [str(ROOT / "deploy" / "run.sh")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pgid = process.pid
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(port):
            assert process.poll() is None, output.read_text()
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(1)
        assert _redis_answers(redis_port)
        said = output.read_text()
        assert f"portal on http://127.0.0.1:{port}" in said
        assert "Editable installation" not in said

        if stop == signal.SIGINT:
            os.killpg(pgid, signal.SIGINT)  # what Ctrl-C in its terminal sends
        else:
            process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _group_alive(pgid) == [], output.read_text()
        assert not _answers(port)
        assert not _redis_answers(redis_port), "the Redis it started still runs"
        assert "stopping" in output.read_text()
    finally:
        if process.poll() is None:
            os.killpg(pgid, signal.SIGKILL)
        subprocess.run(
            ["redis-cli", "-p", str(redis_port), "shutdown", "nosave"],
            capture_output=True,
            check=False,
        )
