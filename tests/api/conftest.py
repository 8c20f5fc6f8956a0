from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.common.ratelimit import rate_limiter

Client = Callable[..., APIClient]


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    rate_limiter().reset()
    yield
    rate_limiter().reset()


@pytest.fixture
def api(db: None) -> Client:
    """``api(user, scopes=("write",))``: an APIClient holding a fresh personal token."""

    def make(user: User, scopes: tuple[str, ...] = ("write",)) -> APIClient:
        _, plaintext = api_token_create(
            actor=user, name=f"test {'+'.join(scopes)}", scopes=list(scopes), expires_at=None
        )
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        return client

    return make
