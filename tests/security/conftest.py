from __future__ import annotations

from collections.abc import Iterator

import pytest

from apps.common.ratelimit import rate_limiter
from tests.portal.conftest import portal as portal  # the catalog fixture, for the form fuzz


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    """Counts of requests and failures start from nothing in every test."""
    rate_limiter().reset()
    yield
    rate_limiter().reset()
