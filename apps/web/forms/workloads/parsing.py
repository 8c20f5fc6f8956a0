"""What the request forms' text fields become: a command split like a shell does, variables,
secret references, a grid and ranges; a malformed line is a form error naming it."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms


def split_command(value: str, what: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        verb = "have" if what.endswith("s") else "has"  # "the arguments have", "the command has"
        raise forms.ValidationError(f"The {what} {verb} unbalanced quotes ({exc}).") from exc


def parse_env(text: str) -> dict[str, str]:
    """``NAME=value`` lines (blank lines and ``#`` comments ignored) as a dict. Which names
    and how many are allowed is the request rules' to say."""
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep:
            raise forms.ValidationError(
                f"Line {number}: write NAME=value, with a name of letters, digits and _ "
                f"that does not start with a digit (got “{line[:40]}”)."
            )
        if name in env:
            raise forms.ValidationError(f"Line {number}: {name} is set twice.")
        env[name] = value
    return env


def parse_secret_refs(text: str) -> list[dict[str, str]]:
    """``NAME[:ENV[=KEY]]`` lines (as the CLI's ``--secret``) as references. Whether the secrets
    exist and may be used is the request rules' to say."""
    refs: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        env, _, key = rest.partition("=")
        ref = {"name": name.strip()}
        if env.strip():
            ref["env"] = env.strip()
        if key.strip():
            ref["key"] = key.strip()
        refs.append(ref)
    return refs


def _number(text: str) -> int | float:
    value = float(text)
    return (
        int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    )


def parse_ranges(text: str) -> dict[str, list[Any]]:
    """``name=low..high [scale]`` lines as ranges to sample. Which names, bounds and scales are
    allowed is the request rules' to say."""
    ranges: dict[str, list[Any]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, rest = line.partition("=")
        name = name.strip()
        bounds, *scale = rest.split() or [""]
        low, dots, high = bounds.partition("..")
        try:
            spec: list[Any] = [_number(low), _number(high), *scale[:1]]
        except ValueError:
            spec = []
        if not sep or not name or not dots or not spec or len(scale) > 1:
            raise forms.ValidationError(
                f"Line {number}: write name=low..high, then log or int if so (got “{line[:40]}”)."
            )
        if name in ranges:
            raise forms.ValidationError(f"Line {number}: {name} is listed twice.")
        ranges[name] = spec
    return ranges


def parse_grid(text: str) -> dict[str, list[str]]:
    """``name=v1,v2,v3`` lines as a parameter grid. Which names and how many points are allowed
    is the request rules' to say."""
    grid: dict[str, list[str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, values = line.partition("=")
        name = name.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not items:
            raise forms.ValidationError(
                f"Line {number}: write name=value1,value2,… (got “{line[:40]}”)."
            )
        if name in grid:
            raise forms.ValidationError(f"Line {number}: {name} is listed twice.")
        grid[name] = items
    return grid
