"""The programs of the training and serving images (deploy/images/), run on this machine with
its Debian python3 and numpy, as subprocesses: what the containers will run, without them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.redis_server import free_port
from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "deploy" / "images" / "training" / "train.py"
SERVE = ROOT / "deploy" / "images" / "serving" / "serve.py"


def _has_numpy(python: str) -> bool:
    done = subprocess.run([python, "-c", "import numpy"], capture_output=True, timeout=60)
    return done.returncode == 0


@pytest.fixture(scope="module")
def python() -> str:
    """An interpreter with numpy: the images run Debian's python3 with python3-numpy."""
    candidates = [os.environ.get("GPUPAAS_IMAGE_PYTHON"), "/usr/bin/python3", sys.executable]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and _has_numpy(candidate):
            return candidate
    pytest.fail(
        "no python3 with numpy for the images' programs: apt-get install python3-numpy "
        "(or set GPUPAAS_IMAGE_PYTHON)",
        pytrace=False,
    )


@dataclass
class Run:
    returncode: int
    lines: list[str]

    @property
    def metrics(self) -> list[dict[str, Any]]:
        return [m for m in self._json() if "checkpoint" not in m]

    @property
    def checkpoints(self) -> list[dict[str, Any]]:
        """The checkpoint reports (docs/checkpoints.md) it printed, in order."""
        return [m["checkpoint"] for m in self._json() if "checkpoint" in m]

    def _json(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines if line.startswith("{")]

    def checksum(self) -> str:
        (done,) = [line for line in self.lines if "final weights checksum" in line]
        return done.split("checksum ")[1].split()[0]


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NNODES", "NODE_RANK"))}
    env.update(
        GPUPAAS_CHECKPOINT_DIR=str(tmp / "checkpoints"),
        GPUPAAS_OUTPUT_DIR=str(tmp / "outputs"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(extra)
    return env


def train(python: str, tmp: Path, *args: str, **env: str) -> Run:
    tmp.mkdir(exist_ok=True)
    done = subprocess.run(
        [python, str(TRAIN), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp, **env),
        cwd=tmp,
    )
    return Run(done.returncode, (done.stdout + done.stderr).splitlines())


def test_training_loss_falls_and_checkpoints_are_written(python: str, tmp_path: Path) -> None:
    run = train(python, tmp_path, "--steps", "30", "--checkpoint-every", "10")

    assert run.returncode == 0, run.lines
    steps = run.metrics
    assert [m["step"] for m in steps] == list(range(1, 31))
    assert steps[-1]["loss"] < steps[0]["loss"] / 20
    assert steps[0]["lr"] == 0.05
    saved = json.loads((tmp_path / "checkpoints" / "checkpoint.json").read_text())
    assert saved["step"] == 30
    assert len(saved["weights"]) == 16
    assert saved["rng"]["next_step"] == 31
    assert os.listdir(tmp_path / "checkpoints") == ["checkpoint.json"]  # no temporary file left
    # Each checkpoint is reported on the log once saved, in the platform's line format.
    reported = run.checkpoints
    assert [c["step"] for c in reported] == [10, 20, 30]
    assert set(reported[-1]) == {"step", "at"} and reported[-1]["at"] == saved["saved_at"]
    printed = [json.loads(line) for line in run.lines if line.startswith("{")]
    first = printed.index({"checkpoint": reported[0]})
    assert printed[first - 1]["step"] == 10  # right after the step it saved
    model = json.loads((tmp_path / "outputs" / "model.json").read_text())
    assert model["checksum"] == run.checksum()


def test_sigterm_saves_a_checkpoint_and_a_restart_resumes_from_it(
    python: str, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [
            python,
            str(TRAIN),
            "--steps",
            "500",
            "--step-seconds",
            "0.02",
            "--checkpoint-every",
            "1000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(tmp_path),
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith('{"step": 5,'):
            proc.send_signal(signal.SIGTERM)
            break
    rest, _ = proc.communicate(timeout=20)
    lines += rest.splitlines()

    assert proc.returncode == 143, lines
    (said,) = [line for line in lines if line.startswith("received SIGTERM at step ")]
    stopped = int(said.split("at step ")[1].split(";")[0])
    assert stopped >= 5
    assert "checkpoint saved" in said
    saved = json.loads((tmp_path / "checkpoints" / "checkpoint.json").read_text())
    assert saved["step"] == stopped
    assert {"checkpoint": {"step": stopped, "at": saved["saved_at"]}} in [
        json.loads(line) for line in lines if line.startswith('{"checkpoint"')
    ]  # the save on SIGTERM is reported too

    resumed = train(python, tmp_path, "--steps", str(stopped + 5), GPUPAAS_RESTART_COUNT="1")

    assert resumed.returncode == 0, resumed.lines
    assert f"resuming from checkpoint at step {stopped} (restart count 1)" in resumed.lines
    assert [m["step"] for m in resumed.metrics] == list(range(stopped + 1, stopped + 6))
    # The batches are keyed by step: the interrupted run ends where an uninterrupted one does.
    straight = train(python, tmp_path / "straight", "--steps", str(stopped + 5))
    assert straight.checksum() == resumed.checksum()


def test_two_ranks_all_reduce_and_agree_on_the_weights(python: str, tmp_path: Path) -> None:
    port = str(free_port())

    def start(rank: int, steps: int) -> subprocess.Popen[str]:
        env = _env(
            tmp_path, NNODES="2", NODE_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port
        )
        return subprocess.Popen(
            [python, str(TRAIN), "--steps", str(steps), "--checkpoint-every", "5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp_path,
        )

    def both(steps: int) -> list[Run]:
        worker = start(1, steps)  # first: it retries until rank 0 listens
        time.sleep(0.3)
        master = start(0, steps)
        runs = []
        for proc in (master, worker):
            out, _ = proc.communicate(timeout=60)
            runs.append(Run(proc.returncode, out.splitlines()))
        return runs

    master, worker = both(10)

    assert master.returncode == 0, master.lines
    assert worker.returncode == 0, worker.lines
    assert any(line.startswith("rank 0 of 2: connected to peers rank 1") for line in master.lines)
    assert any(line.startswith("rank 1 of 2: connected to peers") for line in worker.lines)
    assert master.metrics == worker.metrics  # the averaged loss, step by step
    assert master.checksum() == worker.checksum()
    solo = train(python, tmp_path / "solo", "--steps", "10")
    assert solo.checksum() != master.checksum()  # two ranks' batches averaged: another run

    master, worker = both(15)  # every rank resumes from rank 0's checkpoint

    for run in (master, worker):
        assert run.returncode == 0, run.lines
        assert any(line.startswith("resuming from checkpoint at step 10") for line in run.lines)
        assert [m["step"] for m in run.metrics] == list(range(11, 16))
    assert master.checksum() == worker.checksum()


def test_exit_code_and_memory_are_as_asked(python: str, tmp_path: Path) -> None:
    run = train(python, tmp_path, "--steps", "2", "--exit-code", "3", "--allocate-mib", "8")

    assert run.returncode == 3
    assert "allocated 8 MiB" in run.lines
    assert run.lines[-1] == "exiting with code 3 (--exit-code)"


# --- serving ----------------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    proc: subprocess.Popen[str]


def _start_server(python: str, tmp: Path, *args: str) -> Server:
    model = tmp / "model.json"
    subprocess.run([python, str(SERVE), "train", "--out", str(model)], check=True, timeout=60)
    port = free_port()
    proc = subprocess.Popen(
        [python, str(SERVE), "--model", str(model), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "GPUPAAS_PORT": str(port), "PYTHONDONTWRITEBYTECODE": "1"},
    )
    server = Server(f"http://127.0.0.1:{port}", proc)

    def healthy() -> bool:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            return get(server, "/health")[0] == 200
        except OSError:
            return False

    wait_for(healthy, timeout=20, every=0.05)
    return server


def _stop(server: Server) -> str:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    out, _ = server.proc.communicate(timeout=20)
    return out


@pytest.fixture(scope="module")
def server(python: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serving")
    started = _start_server(python, tmp)
    yield started
    _stop(started)


def get(server: Server, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(server.url + path, timeout=10) as response:  # noqa: S310
        return response.status, response.read().decode()


def post(server: Server, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(  # noqa: S310 - the test's own server
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_completions_are_deterministic_at_temperature_zero(server: Server) -> None:
    body = {"model": "gpupaas-charlm", "prompt": "The keeper", "max_tokens": 40, "temperature": 0}

    first = post(server, "/v1/completions", body)
    second = post(server, "/v1/completions", body)

    assert first[0] == second[0] == 200
    answer = first[1]
    assert answer["object"] == "text_completion"
    assert answer["model"] == "gpupaas-charlm"
    assert answer["id"].startswith("cmpl-")
    (choice,) = answer["choices"]
    assert len(choice["text"]) == 40
    assert choice["index"] == 0
    assert choice["finish_reason"] == "length"
    assert choice["text"] == second[1]["choices"][0]["text"]
    assert answer["usage"] == {"prompt_tokens": 10, "completion_tokens": 40, "total_tokens": 50}


def test_sampling_with_a_seed_repeats_and_stop_ends_early(server: Server) -> None:
    body = {"prompt": "the sea", "max_tokens": 30, "temperature": 0.8, "seed": 7}

    texts = [post(server, "/v1/completions", body)[1]["choices"][0]["text"] for _ in range(2)]
    stopped = post(server, "/v1/completions", {**body, "stop": [" "]})[1]["choices"][0]

    assert texts[0] == texts[1]
    assert " " not in stopped["text"]
    assert stopped["finish_reason"] == "stop"


def stream(server: Server, path: str, body: dict[str, Any]) -> tuple[str, list[Any]]:
    """A streamed call: its content type and its events, in order."""
    request = urllib.request.Request(  # noqa: S310 - the test's own server
        server.url + path,
        data=json.dumps({**body, "stream": True}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        lines = response.read().decode().split("\n\n")
        kind = response.headers["Content-Type"]
    events = [line.removeprefix("data: ") for line in lines if line]
    assert events[-1] == "[DONE]"
    return kind, [json.loads(e) for e in events[:-1]]


def test_streamed_completions_are_server_sent_events_of_the_same_text(server: Server) -> None:
    body = {"prompt": "The keeper", "max_tokens": 24, "temperature": 0}
    whole = post(server, "/v1/completions", body)[1]["choices"][0]["text"]

    kind, events = stream(server, "/v1/completions", body)
    _, chat = stream(
        server, "/v1/chat/completions", {"messages": [{"role": "user", "content": "The keeper"}]}
    )

    assert kind == "text/event-stream"
    assert len(events) == 25  # one per character, then the one that says why it ended
    assert "".join(e["choices"][0]["text"] for e in events) == whole
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert {e["id"] for e in events} == {events[0]["id"]}
    assert all(e["object"] == "chat.completion.chunk" for e in chat)
    assert chat[0]["choices"][0]["delta"]["content"]
    assert post(server, "/v1/completions", {**body, "stream": True, "n": 2})[0] == 400


def test_bad_requests_get_openai_style_errors(server: Server) -> None:
    code, body = post(server, "/v1/completions", {"prompt": "x", "max_tokens": 0})

    assert code == 400
    assert body["object"] == "error"
    assert "max_tokens" in body["message"]
    assert post(server, "/v1/nothing", {})[0] == 404


def test_models_health_and_metrics(server: Server) -> None:
    post(server, "/v1/completions", {"prompt": "a", "max_tokens": 2, "temperature": 0})

    status, models = get(server, "/v1/models")
    health = get(server, "/health")
    status_metrics, metrics = get(server, "/metrics")

    assert status == 200
    assert [m["id"] for m in json.loads(models)["data"]] == ["gpupaas-charlm"]
    assert health == (200, "")
    assert status_metrics == 200
    lines = metrics.splitlines()
    assert any(
        line.startswith(
            'gpupaas_serving_requests_total{method="POST",path="/v1/completions",code="200"} '
        )
        for line in lines
    )
    assert any(
        line.startswith('gpupaas_serving_request_duration_seconds_count{path="/v1/completions"} ')
        for line in lines
    )
    assert "# TYPE gpupaas_serving_request_duration_seconds histogram" in lines


def test_sigterm_answers_the_request_in_flight_then_exits_0(python: str, tmp_path: Path) -> None:
    slow = _start_server(python, tmp_path, "--token-delay", "0.05")
    answers: list[tuple[int, dict[str, Any]]] = []
    body = {"prompt": "The", "max_tokens": 30, "temperature": 0}
    request = threading.Thread(target=lambda: answers.append(post(slow, "/v1/completions", body)))
    request.start()
    time.sleep(0.4)  # the request is being generated (30 tokens take 1.5 s)

    slow.proc.send_signal(signal.SIGTERM)
    request.join(timeout=20)
    out, _ = slow.proc.communicate(timeout=20)  # one SIGTERM only: a second one ends it at once

    assert slow.proc.returncode == 0, out
    ((code, answer),) = answers
    assert code == 200
    assert len(answer["choices"][0]["text"]) == 30
    assert "finishing 1 request(s) in flight" in out
    with pytest.raises(OSError):
        get(slow, "/health")


def test_programs_need_only_the_standard_library_and_numpy() -> None:
    for program in (TRAIN, SERVE):
        imports = {
            line.split()[1].split(".")[0]
            for line in program.read_text().splitlines()
            if line.startswith(("import ", "from "))
        }
        assert imports - set(sys.stdlib_module_names) - {"__future__"} == {"numpy"}, program
