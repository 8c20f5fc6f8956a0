"""How long ``gpupaas`` takes to start: ``--help``, and ``list`` against a local stub server.

Each command runs in a fresh interpreter, as a user runs it, with bytecode caches warm
(written under a temporary ``PYTHONPYCACHEPREFIX``, so nothing lands in the checkout). The
baseline, measured in the same run and alternating with ours: the client as it was before its
imports were made lazy (``--baseline`` commit, default 34dba43: one 1,651-line ``main.py``
importing Typer with Rich, httpx and PyYAML at the top), taken from git into a temporary
folder and run by the same interpreter and runner.

Figures per command and version: median wall and CPU (user + system of the child) over
``--runs`` runs, the sum of ``python -X importtime`` self times (everything the run
imported), and which heavy packages it imported. ``list`` asks a stub HTTP server in this
process for a page of 50 workloads, so the network and the portal are not measured.

    .venv/bin/python bench/cli_bench.py [--runs 9] [--baseline 34dba43]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("typer", "click", "rich", "httpx", "yaml", "pydantic")
COMMANDS = {"--help": ["--help"], "list": ["list"]}
GOALS = {"--help": 0.3, "list": 0.6}
# Imports the client from the folder given first, then runs it with the other arguments.
RUNNER = (
    "import sys; sys.path.insert(0, sys.argv[1]); sys.argv = ['gpupaas', *sys.argv[2:]]; "
    "from gpupaas_cli.main import app; app()"
)
# The same, saying at exit which heavy packages were imported (a failed ``import rich`` is in
# -X importtime's list too).
SAYS_HEAVY = (
    "import atexit, sys; atexit.register(lambda: print('heavy:', *[m for m in "
    f"{HEAVY!r} if sys.modules.get(m)], file=sys.stderr)); " + RUNNER
)


def workloads_page(count: int = 50) -> bytes:
    rows = [
        {
            "id": i,
            "name": f"resnet-{i}",
            "kind": "training",
            "state": "running",
            "team": "vision",
            "owner": "alice",
            "gpu_class": "H100-80GB",
            "gpu_milli": 1000,
            "replicas": 2,
            "created_at": "2026-12-01T10:00:00Z",
        }
        for i in range(1, count + 1)
    ]
    return json.dumps({"count": count, "results": rows}).encode()


class Stub(BaseHTTPRequestHandler):
    body = workloads_page()

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def baseline_tree(commit: str, into: Path) -> Path:
    """The client's package at ``commit``, written under ``into``; returns the folder to put
    on sys.path."""
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit, "cli/gpupaas_cli/"],
        cwd=REPO_ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in names:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(
            subprocess.run(
                ["git", "show", f"{commit}:{name}"], cwd=REPO_ROOT, check=True, capture_output=True
            ).stdout
        )
    return into / "cli"


def run_once(folder: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(folder), *args], env=env, capture_output=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{args} failed: {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def imports(folder: Path, args: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    """Milliseconds of ``-X importtime`` self times, and the heavy packages imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", SAYS_HEAVY, str(folder), *args],
        env=env,
        capture_output=True,
        text=True,
    )
    total_us, heavy = 0, []
    for line in done.stderr.splitlines():
        if line.startswith("heavy:"):
            heavy = line.split()[1:]
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        total_us += int(line.removeprefix("import time:").split("|")[0])
    return total_us / 1000, heavy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", default="34dba43", help="the commit of the eager client")
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as tmp:
        versions = {
            "before": baseline_tree(args.baseline, Path(tmp) / "baseline"),
            "ours": REPO_ROOT / "cli",
        }
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONDONTWRITEBYTECODE", "GPUPAAS_RICH"} and not k.startswith("GPUPAAS_")
        }
        env.update(
            PYTHONPYCACHEPREFIX=str(Path(tmp) / "pycache"),
            GPUPAAS_URL=f"http://127.0.0.1:{server.server_address[1]}",
            GPUPAAS_TOKEN="gpp_bench_token",  # noqa: S106 - the stub checks nothing
            GPUPAAS_CONFIG=str(Path(tmp) / "config.json"),
            COLUMNS="100",
        )
        results: dict[tuple[str, str], dict[str, Any]] = {}
        for command, argv in COMMANDS.items():
            for version, folder in versions.items():
                run_once(folder, argv, env)  # writes the bytecode caches
                results[command, version] = {"wall": [], "cpu": []}
            for _ in range(args.runs):  # alternating, so that both see the same neighbours
                for version, folder in versions.items():
                    wall, cpu = run_once(folder, argv, env)
                    results[command, version]["wall"].append(wall)
                    results[command, version]["cpu"].append(cpu)
            for version, folder in versions.items():
                ms, heavy = imports(folder, argv, env)
                results[command, version].update(import_ms=ms, heavy=heavy)
    server.shutdown()

    load = os.getloadavg()[0]
    print(f"gpupaas start-up, {args.runs} runs each, medians; load average {load:.1f}")
    print(
        f"{'command':<8} {'version':<8} {'wall s':>7} {'CPU s':>6} {'imports ms':>10}  "
        "heavy packages imported"
    )
    for command in COMMANDS:
        for version in versions:
            r = results[command, version]
            r["wall_p50"] = statistics.median(r["wall"])
            r["cpu_p50"] = statistics.median(r["cpu"])
            print(
                f"{command:<8} {version:<8} {r['wall_p50']:>7.3f} {r['cpu_p50']:>6.3f} "
                f"{r['import_ms']:>10.1f}  {', '.join(r['heavy']) or '-'}"
            )
    for command, goal in GOALS.items():
        ours, before = results[command, "ours"], results[command, "before"]
        print(
            f"{command}: ours ÷ before wall {ours['wall_p50'] / before['wall_p50']:.2f}, "
            f"CPU {ours['cpu_p50'] / before['cpu_p50']:.2f}, imports "
            f"{ours['import_ms'] / before['import_ms']:.2f}; goal wall < {goal} s on a quiet "
            f"machine: {'met' if ours['wall_p50'] < goal else 'not met'} here"
        )
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    print(f"the bench cost {cpu:.1f} s of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
