"""What the Go builds of the development tools (kubesim, CoreDNS, Traefik, helm) say while they
run: one line every 30 s with the packages compiled of the total, the time spent and an
estimate of what is left, in the terminal and in the build's log.

``go build -v`` (and ``go install -v``) print one line per package they compile; the total is
what ``go list -deps`` counts for the same target (it also downloads the modules first, which
is said as its own step). A warm cache compiles few packages: the estimate then only shrinks.
All the builds share Go's one build cache (``GOCACHE``, by default ``~/.cache/go-build``), so a
package compiled for one (client-go for kubesim and Traefik, say) is not compiled again for
another built with the same flags.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PROGRESS_EVERY = 30.0
# Flags every build shares, so their packages are shared in the build cache: no paths of this
# machine in the binaries, no DWARF (the binaries are stripped anyway: compiling it is wasted).
COMMON_FLAGS = ("-trimpath", "-gcflags=all=-dwarf=false")

Progress = Callable[[str], None]


def package_count(
    go: str, target: str, *, cwd: Path | None, env: dict[str, str], timeout: float = 900
) -> int:
    """How many packages building ``target`` links (the denominator of the progress), 0 when
    ``go list`` cannot say."""
    try:
        out = subprocess.run(
            [go, "list", "-deps", target],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return len(out.stdout.split()) if out.returncode == 0 else 0


def progress_line(name: str, compiled: int, total: int, elapsed: float) -> str:
    """``kubesim: building, 1200 of 2632 packages (46%), 2.5 min elapsed, about 3 min left``."""
    minutes = f"{elapsed / 60:.1f} min"
    if total <= 0:
        return f"{name}: building, {compiled} packages compiled, {minutes} elapsed"
    share = min(compiled / total, 1.0)
    left = ""
    if share >= 0.05:
        left = f", about {max(elapsed / share - elapsed, 0) / 60:.0f} min left"
    return (
        f"{name}: building, {compiled} of {total} packages ({share:.0%}), {minutes} elapsed{left}"
    )


def run_with_progress(
    cmd: Sequence[str],
    *,
    cwd: Path | None,
    env: dict[str, str],
    log_path: Path,
    total: int,
    name: str,
    on_progress: Progress | None = None,
    every: float = PROGRESS_EVERY,
) -> int:
    """Run a ``go build -v``/``go install -v``, writing its output to ``log_path`` and, every
    ``every`` seconds, a progress line to stderr, the log and ``on_progress``; its exit code."""
    started = time.monotonic()
    compiled = 0
    last = started
    with log_path.open("w") as log_file:
        process = subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        for line in process.stdout:
            log_file.write(line)
            if line and not line.startswith(("#", " ", "\t", "go: ")):
                compiled += 1
            now = time.monotonic()
            if now - last >= every:
                last = now
                message = progress_line(name, compiled, total, now - started)
                print(message, file=sys.stderr, flush=True)
                log_file.write(message + "\n")
                log_file.flush()
                if on_progress is not None:
                    on_progress(message)
        return process.wait()
