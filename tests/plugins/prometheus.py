"""The metrics chain for tests: the DCGM-format exporter of kubesim's GPUs and a real Prometheus
scraping it every second. One of each per pytest process (per xdist worker), free ports, temp
dirs.

Fixtures:

* ``dcgm_sim`` (session): ``HOST:PORT`` of ``python -m deploy.devtools.dcgm_sim`` for the
  session's kubesim cluster.
* ``prometheus_server`` (session): a running ``deploy.devtools.prometheus.Prometheus`` scraping
  it (1 s interval, recording rules loaded), returned once the first scrape is stored.
* ``prometheus_settings`` (function): PROMETHEUS_URL and TELEMETRY_ENABLED for one test.
* ``start_dcgm_sim`` / ``start_prometheus``: the same, for tests that run the chain over each
  exporter variant (``dcgm_sim.EXPORTERS``) with a simulator and a Prometheus of their own.

Tests using them are marked ``prometheus`` (and ``kubesim``) automatically. Without the Debian
``prometheus`` package they fail, naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from deploy.devtools import prometheus as prom
from deploy.devtools.kubesim import Kubesim

FIXTURES = frozenset({"dcgm_sim", "prometheus_server", "prometheus_settings"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if FIXTURES.intersection(getattr(item, "fixturenames", ())):
            if item.get_closest_marker("prometheus") is None:
                item.add_marker(pytest.mark.prometheus)
            if item.get_closest_marker("kubesim") is None:
                item.add_marker(pytest.mark.kubesim)


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback
        return bytes(response.read())


def prom_query(url: str, promql: str) -> list[dict[str, Any]]:
    body = _get(f"{url}/api/v1/query?query={urllib.parse.quote(promql)}")
    return list(json.loads(body)["data"]["result"])


def start_dcgm_sim(
    kubeconfig: str, log_dir: Path, exporter: str = "agent"
) -> tuple[str, subprocess.Popen[bytes]]:
    """Start the DCGM simulator imitating ``exporter`` (see ``dcgm_sim.EXPORTERS``); returns its
    ``HOST:PORT`` and process once it answers."""
    port = prom.free_port()
    log_path = log_dir / f"dcgm-sim-{exporter}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "deploy.devtools.dcgm_sim",
                "--kubeconfig",
                kubeconfig,
                "--port",
                str(port),
                "--exporter",
                exporter,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            _get(f"http://127.0.0.1:{port}/healthz")
            break
        except (urllib.error.URLError, OSError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"dcgm_sim did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.2)
    return f"127.0.0.1:{port}", process


def start_prometheus(target: str, data_dir: Path) -> prom.Prometheus:
    """A Prometheus scraping ``target`` every second, returned once the first scrape is in."""
    try:
        prom.find_binary()
    except prom.PrometheusError as exc:
        pytest.fail(f"{exc} (.ci/run installs it)", pytrace=False)
    server = prom.start(data_dir, [target], scrape_interval="1s")
    deadline = time.monotonic() + 60
    # Prometheus applies a new scrape config up to 5 s after it is ready.
    while not prom_query(server.url, 'up{job="dcgm-exporter"} == 1'):
        if time.monotonic() > deadline:
            server.stop()
            pytest.fail("Prometheus never scraped the DCGM simulator")
        time.sleep(0.3)
    return server


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def dcgm_sim(kubesim: Kubesim, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    address, process = start_dcgm_sim(str(kubesim.kubeconfig), tmp_path_factory.mktemp("dcgm"))
    yield address
    stop_process(process)


@pytest.fixture(scope="session")
def prometheus_server(
    dcgm_sim: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[prom.Prometheus]:
    server = start_prometheus(dcgm_sim, tmp_path_factory.mktemp("prometheus"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prometheus_settings(settings: Any, prometheus_server: prom.Prometheus) -> str:
    settings.PROMETHEUS_URL = prometheus_server.url
    settings.TELEMETRY_ENABLED = True
    return prometheus_server.url
