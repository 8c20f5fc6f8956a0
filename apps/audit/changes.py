"""What changed in a row, as JSON the audit trail can keep: the services that edit whole rows
(the admin's forms) snapshot the stored row, save, and record the difference."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import models


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON: decimals and UUIDs as text, times in ISO 8601 to the second,
    durations in seconds."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal | UUID):
        return str(value)
    if isinstance(value, datetime | time):
        # To the second, as the admin's forms show and send them back: a form saved unchanged
        # drops the microseconds, which is no change worth recording.
        return value.replace(microsecond=0).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def snapshot(obj: models.Model, *, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The row's stored columns (foreign keys as ids, keyed ``<name>_id``), without its primary
    key and without ``exclude`` (secrets such as a password hash never reach the trail)."""
    skipped = set(exclude)
    return {
        field.attname: jsonable(getattr(obj, field.attname))
        for field in obj._meta.concrete_fields
        if not field.primary_key and field.name not in skipped and field.attname not in skipped
    }


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{field: {"before": …, "after": …}}`` for every key whose value differs."""
    return {
        key: {"before": before.get(key), "after": after.get(key)}
        for key in sorted(set(before) | set(after))
        if before.get(key) != after.get(key)
    }
