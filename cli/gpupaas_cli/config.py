"""Where the CLI keeps the server URL and the token: a JSON file only its owner can read."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV_CONFIG = "GPUPAAS_CONFIG"
ENV_URL = "GPUPAAS_URL"
ENV_TOKEN = "GPUPAAS_TOKEN"  # noqa: S105 - the variable's name, not a secret


class ConfigError(RuntimeError):
    """The CLI is not configured, or its file cannot be used."""


@dataclass(frozen=True)
class Config:
    url: str
    token: str


def config_path() -> Path:
    """$GPUPAAS_CONFIG, else $XDG_CONFIG_HOME/gpupaas/config.json, else ~/.config/…"""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpupaas" / "config.json"


def normalise_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"The URL must start with http:// or https://, not {url!r}.")
    return url


def save(config: Config, path: Path | None = None) -> Path:
    """Write the file with mode 0600 (created so, never briefly readable by others)."""
    target = path or config_path()
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = json.dumps({"url": config.url, "token": config.token}, indent=2) + "\n"
    tmp = target.with_name(f".{target.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data.encode("utf-8"))
    finally:
        os.close(fd)
    os.replace(tmp, target)
    return target


def load(path: Path | None = None) -> Config:
    """The configuration; GPUPAAS_URL and GPUPAAS_TOKEN override the file (for CI)."""
    target = path or config_path()
    stored: dict[str, str] = {}
    if target.exists():
        try:
            raw = json.loads(target.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{target} cannot be read: {exc}") from exc
        if isinstance(raw, dict):
            stored = {k: str(v) for k, v in raw.items() if isinstance(v, str)}
    url = os.environ.get(ENV_URL) or stored.get("url")
    token = os.environ.get(ENV_TOKEN) or stored.get("token")
    if not url or not token:
        raise ConfigError(
            "gpupaas is not configured: run `gpupaas configure --url URL` "
            f"(or set {ENV_URL} and {ENV_TOKEN})."
        )
    return Config(url=normalise_url(url), token=token)
