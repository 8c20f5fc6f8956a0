"""The CLI as a data scientist installs it: ``pip install ./cli`` into a fresh virtualenv that
holds nothing of the server, then a real round trip against the live test portal."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from apps.workloads import core
from apps.workloads.models import Workload
from tests.cli.conftest import Cli
from tests.plugins.cast import Cast

ROOT = Path(__file__).resolve().parents[2]
PINS = {"httpx": "0.28.1", "typer": "0.16.1", "click": "8.5.1", "PyYAML": "6.0.2"}
COMMANDS = ("configure", "submit", "list", "status", "cancel", "logs", "quota", "gpus")

# One worker builds the virtualenv once (per session: pytest-django reorders tests by their
# database use, which would split a module-scoped fixture) and runs every test here.
pytestmark = pytest.mark.xdist_group("cli-standalone")


@dataclass(frozen=True)
class Venv:
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def gpupaas(self) -> Path:
        return self.path / "bin" / "gpupaas"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without this test run's Python settings or virtualenv, so that the
    subprocess sees only what was installed into the new virtualenv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "GPUPAAS_", "DJANGO_")) and k != "VIRTUAL_ENV"
    }
    env.update(extra)
    return env


def run(
    args: list[str], cwd: Path, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    if importlib.util.find_spec("venv") is None or importlib.util.find_spec("ensurepip") is None:
        pytest.skip("python3 -m venv is unavailable here (Debian: apt-get install python3-venv)")
    base = tmp_path_factory.mktemp("cli-standalone")
    # Build from a copy, so that the build leaves nothing in the checkout.
    source = base / "src"
    shutil.copytree(
        ROOT / "cli",
        source,
        ignore=shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__"),
    )
    created = Venv(base / "venv")
    started = time.monotonic()
    done = run([sys.executable, "-m", "venv", str(created.path)], cwd=base)
    assert done.returncode == 0, done.stderr
    done = run(
        [str(created.python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
         str(source)],
        cwd=base,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    print(f"virtualenv with ./cli installed in {time.monotonic() - started:.1f} s")
    return created


def test_the_venv_holds_the_client_and_nothing_of_the_server(venv: Venv, tmp_path: Path) -> None:
    for module in ("django", "celery", "gpupaas", "apps", "rest_framework"):
        done = run([str(venv.python), "-c", f"import {module}"], cwd=tmp_path)
        assert done.returncode != 0, f"{module} is importable in the CLI's virtualenv"
        assert "ModuleNotFoundError" in done.stderr
    versions = run(
        [str(venv.python), "-c",
         "import json, importlib.metadata as m; "
         f"print(json.dumps({{n: m.version(n) for n in {sorted(PINS)!r}}}))"],
        cwd=tmp_path,
    )  # fmt: skip
    assert versions.returncode == 0, versions.stderr
    assert json.loads(versions.stdout) == PINS

    help_ = run([str(venv.gpupaas), "--help"], cwd=tmp_path)
    assert help_.returncode == 0, help_.stderr
    for command in COMMANDS:
        assert f" {command} " in help_.stdout, f"`{command}` missing from --help"


def test_round_trip_with_the_installed_binary(
    venv: Venv, cast: Cast, cli_for: Callable[..., Cli], tmp_path: Path
) -> None:
    cli = cli_for(cast.owner)
    config = str(tmp_path / "home" / "gpupaas.json")

    def gpupaas(*args: str) -> subprocess.CompletedProcess[str]:
        # Only the config file: no GPUPAAS_URL or GPUPAAS_TOKEN after `configure`.
        return run([str(venv.gpupaas), *args], cwd=tmp_path, GPUPAAS_CONFIG=config)

    configured = gpupaas("configure", "--url", cli.url, "--token", cli.token)
    assert configured.returncode == 0, configured.stderr
    assert "Signed in as owner." in configured.stdout

    submitted = gpupaas(
        "submit", "job", "--name", "laptop-run", "--gpu-class", cast.gpu_class.name,
        "--image", cast.image.name, "--gpu", "1", "--json", "--", "python", "train.py",
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    workload_id = json.loads(submitted.stdout)["id"]
    assert Workload.objects.get(pk=workload_id).name == "laptop-run"

    listed = gpupaas("list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    assert [row[:3] for row in rows] == [[str(workload_id), "laptop-run", "training"]]

    cancelled = gpupaas("cancel", str(workload_id), "--reason", "from a laptop")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"#{workload_id} laptop-run: cancelled"

    status = gpupaas("status", str(workload_id))
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[3].split() == ["state", "cancelled"]
    assert Workload.objects.get(pk=workload_id).state == core.CANCELLED
