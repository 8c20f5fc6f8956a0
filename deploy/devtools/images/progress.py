"""What a build says as it goes: its steps with their durations, and logged commands."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from deploy.devtools.images.recipes import ImageError


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


@contextlib.contextmanager
def _step(image: str, what: str, estimate: str = "") -> Iterator[None]:
    """Say what a step does (with its estimate when it takes a while) and how long it took."""
    if estimate:
        say(f"building {image} image: {what} ({estimate})")
    started = time.monotonic()
    yield
    took = time.monotonic() - started
    if estimate or took > 5:
        say(f"building {image} image: {what}: done in {_duration(took)}")


def _run_logged(argv: Sequence[str], log: Path, label: str, **kwargs: Any) -> None:
    """Run a command with its output appended to ``log``; every 30 s say that it still runs."""
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **kwargs)
        next_note = started + 30
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() >= next_note:
                say(f"  … {label}: still running after {_duration(time.monotonic() - started)}")
                next_note += 30
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        raise ImageError(
            f"{label} failed (exit {proc.returncode}); the end of {log}:\n" + "\n".join(tail)
        )
