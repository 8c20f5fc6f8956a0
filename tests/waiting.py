"""Polling for tests that watch a real part (the cluster, Prometheus) converge."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(check: Callable[[], Any], timeout: float = 40.0, every: float = 0.3) -> Any:
    """Call ``check`` until it returns something truthy, and return that; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {check.__qualname__}"
            )
        time.sleep(every)
