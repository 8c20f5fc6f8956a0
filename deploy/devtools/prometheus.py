"""Run Debian's Prometheus for development and tests, scraping DCGM-format exporters.

Command line::

    python -m deploy.devtools.prometheus up --data-dir var/prometheus --port 9090 \\
        --target 127.0.0.1:9400 [--target HOST:PORT …] [--scrape-interval 5s]
    python -m deploy.devtools.prometheus config --target 127.0.0.1:9400   # print the config

``up`` runs in the foreground until SIGTERM/Ctrl-C; it writes ``DATA_DIR/prometheus.yml``,
stores the TSDB in ``DATA_DIR/data``, loads ``deploy/prometheus/rules.yml`` and writes
``DATA_DIR/READY`` (``{"url": …, "pid": …}``) once Prometheus answers ``/-/ready``.

``PROMETHEUS_BINARY`` selects the binary (default: ``prometheus`` on PATH, then
/usr/bin/prometheus — Debian package ``prometheus``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
RULES_FILE = REPO_ROOT / "deploy" / "prometheus" / "rules.yml"
# The labels a Kubernetes scrape gives the exporter's target: the exporter's own pod. The
# exporter's namespace/pod/container labels then arrive renamed to exported_*.
EXPORTER_TARGET_LABELS = {
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-sim",
    "container": "nvidia-dcgm-exporter",
}


class PrometheusError(RuntimeError):
    """Prometheus is not installed or did not come up."""


def find_binary() -> str:
    for candidate in (
        os.environ.get("PROMETHEUS_BINARY"),
        shutil.which("prometheus"),
        "/usr/bin/prometheus",
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise PrometheusError(
        "prometheus was not found (Debian package `prometheus`; or set PROMETHEUS_BINARY)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def render_config(
    targets: Sequence[str],
    *,
    scrape_interval: str = "5s",
    rules: Sequence[Path] = (RULES_FILE,),
    kubernetes_labels: bool = True,
) -> str:
    static: dict[str, object] = {"targets": list(targets)}
    if kubernetes_labels:
        static["labels"] = dict(EXPORTER_TARGET_LABELS)
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "evaluation_interval": scrape_interval,
        },
        "rule_files": [str(r) for r in rules],
        "scrape_configs": [
            {"job_name": "dcgm-exporter", "static_configs": [static]},
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


@dataclass
class Prometheus:
    url: str
    port: int
    data_dir: Path
    process: subprocess.Popen[bytes]

    def stop(self, timeout: float = 10.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "READY").unlink()

    def __enter__(self) -> Prometheus:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def start(
    data_dir: Path,
    targets: Sequence[str],
    *,
    port: int = 0,
    scrape_interval: str = "5s",
    retention: str = "15d",
    timeout: float = 60.0,
    kubernetes_labels: bool = True,
) -> Prometheus:
    """Start Prometheus on 127.0.0.1 (a free port when ``port`` is 0) and wait until ready."""
    binary = find_binary()
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "prometheus.yml"
    config.write_text(
        render_config(targets, scrape_interval=scrape_interval, kubernetes_labels=kubernetes_labels)
    )
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    log = (data_dir / "prometheus.log").open("ab")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir / 'data'}",
            f"--storage.tsdb.retention.time={retention}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    server = Prometheus(url=url, port=port, data_dir=data_dir, process=process)
    deadline = time.monotonic() + timeout
    while not _ready(url):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            tail = (data_dir / "prometheus.log").read_text(errors="replace")[-2000:]
            raise PrometheusError(f"prometheus did not become ready on {url}:\n{tail}")
        time.sleep(0.1)
    (data_dir / "READY").write_text(json.dumps({"url": url, "pid": process.pid}))
    return server


@contextlib.contextmanager
def running(data_dir: Path, targets: Sequence[str], **kwargs: object) -> Iterator[Prometheus]:
    server = start(data_dir, targets, **kwargs)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.prometheus")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("up", "config"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--target", action="append", default=[], help="HOST:PORT to scrape")
        cmd.add_argument("--scrape-interval", default="5s")
        cmd.add_argument(
            "--plain-labels",
            action="store_true",
            help="no Kubernetes-style target labels (the exporter's pod labels stay as they are)",
        )
    up = sub.choices["up"]
    up.add_argument("--data-dir", required=True, type=Path)
    up.add_argument("--port", type=int, default=9090)
    up.add_argument("--retention", default="15d")
    args = parser.parse_args(argv)
    targets = args.target or ["127.0.0.1:9400"]
    if args.command == "config":
        print(render_config(targets, scrape_interval=args.scrape_interval), end="")
        return 0
    server = start(
        args.data_dir.resolve(),
        targets,
        port=args.port,
        scrape_interval=args.scrape_interval,
        retention=args.retention,
        kubernetes_labels=not args.plain_labels,
    )
    print(f"prometheus ready at {server.url} (pid {server.process.pid})", flush=True)
    stopping = False

    def _stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        while not stopping and server.process.poll() is None:
            time.sleep(0.5)
    finally:
        server.stop()
    return 0 if stopping else 1


if __name__ == "__main__":
    sys.exit(main())
