"""Typed readers for environment variables.

Every setting comes from the environment through one of these helpers. A value that is
present but malformed raises ``ImproperlyConfigured`` naming the variable, so a typo in a
deployment fails at start-up instead of silently falling back to a default. Secrets may
be given as ``NAME_FILE`` pointing at a file (Docker and Kubernetes secrets).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_MISSING = object()


def _raw(name: str) -> str | None:
    """The variable's value, or the content of the file named by NAME_FILE."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        if name in os.environ:
            raise ImproperlyConfigured(f"Set either {name} or {name}_FILE, not both.")
        try:
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    return os.environ.get(name)


def env_str(name: str, default: str | object = _MISSING) -> str:
    value = _raw(name)
    if value is None:
        if default is _MISSING:
            raise ImproperlyConfigured(f"Environment variable {name} is required.")
        return str(default)
    return value


def env_optional_str(name: str) -> str | None:
    value = _raw(name)
    return value if value else None


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"Environment variable {name}={value!r} is not a boolean (use true/false, 1/0, yes/no)."
    )


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(
            f"Environment variable {name}={value!r} is not an integer."
        ) from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"Environment variable {name}={number} must be ≥ {minimum}.")
    return number


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    value = _raw(name)
    if value is None:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


_RATE_RE = re.compile(r"[1-9][0-9]*/(s|sec|m|min|h|hour|d|day)")


def env_rate(name: str, default: str) -> str:
    """A rate such as ``600/min``: a positive count per s, sec, m, min, h, hour, d or day."""
    value = env_str(name, default).strip()
    if not _RATE_RE.fullmatch(value):
        raise ImproperlyConfigured(
            f"Environment variable {name}={value!r} is not a rate such as 600/min or 20/sec."
        )
    return value


_QUANTITY_RE = re.compile(r"[1-9][0-9]*(Ki|Mi|Gi|Ti|Pi)")


def env_storage(name: str, default: str) -> str:
    """A storage size as Kubernetes writes it back, such as ``100Gi`` or ``1Ti``."""
    value = env_str(name, default).strip()
    if not _QUANTITY_RE.fullmatch(value):
        raise ImproperlyConfigured(
            f"Environment variable {name}={value!r} is not a size such as 100Gi or 1Ti."
        )
    return value


def inherit(module: object, namespace: dict[str, object]) -> None:
    """Copy a settings module's UPPER_CASE values into ``namespace``.

    Environment modules start from base this way rather than with a star-import, so that
    only settings cross over — never helper imports — and each override below it is explicit.
    """
    for name, value in vars(module).items():
        if name.isupper():
            namespace[name] = value
