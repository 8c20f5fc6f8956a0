"""Pytest plugin: counts of the fuzz passes — requests sent and 5xx answers, per pass — shown
in the terminal summary and written to ``test-artifacts/fuzz.json`` (the figures of a
release note). Under pytest-xdist each worker sends its counts to the controller, which adds
them up.

``record(pass_name, status_code)`` from a fuzz test counts one request.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
COUNTS: dict[str, dict[str, int]] = defaultdict(lambda: {"requests": 0, "server_errors": 0})


def record(pass_name: str, status_code: int) -> None:
    counts = COUNTS[pass_name]
    counts["requests"] += 1
    if status_code >= 500:
        counts["server_errors"] += 1


def _merge(data: dict[str, dict[str, int]]) -> None:
    for name, counts in data.items():
        for key, value in counts.items():
            COUNTS[name][key] += value


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: hand the counts to the controller
        workeroutput["fuzz_counts"] = json.dumps(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    raw = getattr(node, "workeroutput", {}).get("fuzz_counts")
    if raw:
        _merge(json.loads(raw))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not COUNTS or hasattr(terminalreporter.config, "workeroutput"):
        return
    terminalreporter.section("fuzz passes")
    for name, counts in sorted(COUNTS.items()):
        terminalreporter.write_line(
            f"{name}: {counts['requests']} requests sent, {counts['server_errors']} answered 5xx"
        )
    out = REPO_ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "fuzz.json").write_text(json.dumps(COUNTS, indent=2, sort_keys=True) + "\n")
