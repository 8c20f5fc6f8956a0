"""What a credential may be: its name, its keys and their values. Pure.

A credential is a Kubernetes Secret in the team namespace (DESIGN.md, "Data and secrets").
The database keeps only its metadata (name, scope, key names, dates, the Secret's stored
name); the values go to the cluster and are never shown back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SCOPE_TEAM = "team"
SCOPE_PERSONAL = "personal"
SCOPES = (SCOPE_TEAM, SCOPE_PERSONAL)

MAX_NAME_LENGTH = 40
MAX_KEYS = 16
MAX_KEY_LENGTH = 128
MAX_VALUE_BYTES = 64 * 1024  # all values of one secret together, UTF-8
K8S_NAME_PREFIX = "gpp-s-"

# DNS-1123 label: lower-case letters, digits and -, starting and ending alphanumeric.
NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# A key of a Kubernetes Secret's data.
KEY_RE = re.compile(r"[-._a-zA-Z0-9]+")

NAME_MISSING = "Give the secret a name."
VALUES_MISSING = "Give at least one key and its value (e.g. token=…)."


def name_problem(name: str) -> str | None:
    if not isinstance(name, str) or not name:
        return NAME_MISSING
    if len(name) > MAX_NAME_LENGTH:
        return f"The name has {len(name)} characters; at most {MAX_NAME_LENGTH}."
    if not NAME_RE.fullmatch(name):
        return (
            f"“{name}” cannot name a secret: use lower-case letters, digits and -, starting "
            "and ending with a letter or digit (e.g. hf or wandb-key)."
        )
    return None


def key_problem(key: str) -> str | None:
    if not isinstance(key, str) or not KEY_RE.fullmatch(key) or key in (".", ".."):
        return f"“{key}” cannot name a key: use letters, digits, -, _ and . (e.g. token)."
    if len(key) > MAX_KEY_LENGTH:
        return f"A key has {len(key)} characters; at most {MAX_KEY_LENGTH}."
    return None


def data_problem(data: Mapping[str, str]) -> str | None:
    """Why these keys and values cannot be a secret, if they cannot. The message names keys,
    never values."""
    if not data:
        return VALUES_MISSING
    if len(data) > MAX_KEYS:
        return f"{len(data)} keys; at most {MAX_KEYS} per secret."
    size = 0
    for key, value in data.items():
        problem = key_problem(key)
        if problem:
            return problem
        if not isinstance(value, str):
            return f"The value of {key} must be text."
        if not value:
            return f"The value of {key} is empty."
        size += len(value.encode())
    if size > MAX_VALUE_BYTES:
        return f"The values take {size} bytes; at most {MAX_VALUE_BYTES} per secret."
    return None


def problems(*, name: str, data: Mapping[str, str]) -> dict[str, str]:
    """Field → message for a secret to create or rotate."""
    errors: dict[str, str] = {}
    for field, problem in (("name", name_problem(name)), ("value", data_problem(data))):
        if problem:
            errors[field] = problem
    return errors
