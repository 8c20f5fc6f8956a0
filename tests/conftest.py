from __future__ import annotations

import os
import time

import pytest
from hypothesis import settings

# The suite's property tests draw the same examples on every run ("ci", the default), so a
# pass or a failure repeats on any machine and in CI; HYPOTHESIS_PROFILE=explore draws new
# random examples each run (and keeps failures in .hypothesis/) to look for new ones. Neither
# has a per-example deadline: on a loaded machine a pure example can take over 200 ms, and
# speed is measured in bench/, not in tests.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("explore", print_blob=True, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

pytest_plugins = [
    "tests.plugins.cast",
    "tests.plugins.redis_server",
    "tests.plugins.oidc",
    "tests.plugins.kubesim",
    "tests.plugins.prometheus",
    "tests.plugins.browser",
    "tests.plugins.fuzz",
    "tests.plugins.receivers",
]


@pytest.fixture
def clear_of_minute_boundary() -> None:
    """Start a test that counts a few requests against an ``N/min`` rate well inside one
    clock minute. The limiter's sliding-window counter weights the previous minute's count
    by the part of it still in the window, so three hits at :59.9 and a fourth at :00.1
    weigh 2.99 and the fourth passes: right for the limiter, wrong for a test that expects
    the fourth refused."""
    into_minute = time.time() % 60
    if into_minute > 55:
        time.sleep(60.2 - into_minute)
