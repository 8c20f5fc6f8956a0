from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.common.ratelimit import rate_limiter
from gpupaas_cli.main import app


@dataclass
class Cli:
    """Runs ``gpupaas`` in-process against the live test server."""

    url: str
    config: Path
    token: str = ""

    def __call__(self, *args: str, token: str | None = None, **env: str) -> Result:
        environment = {
            "GPUPAAS_CONFIG": str(self.config),
            "GPUPAAS_URL": self.url,
            "GPUPAAS_TOKEN": token if token is not None else self.token,
            **env,
        }
        return CliRunner().invoke(app, list(args), env=environment, catch_exceptions=False)


def token_for(user: User, scopes: tuple[str, ...] = ("write",)) -> str:
    _, plaintext = api_token_create(actor=user, name="cli", scopes=list(scopes), expires_at=None)
    return plaintext


@pytest.fixture
def cli_for(live_server: Any, tmp_path: Path, transactional_db: None) -> Callable[..., Cli]:
    rate_limiter().reset()

    def make(user: User | None = None, scopes: tuple[str, ...] = ("write",)) -> Cli:
        cli = Cli(url=live_server.url, config=tmp_path / "config.json")
        if user is not None:
            cli.token = token_for(user, scopes)
        return cli

    return make
