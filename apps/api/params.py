"""Query parameters of the API, parsed one way (``apps.common.parsing``): ASCII digits only,
bounded numbers, months the calendar holds. Anything else is a 400 in the error shape that
names the parameter, never a 500."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from apps.common.parsing import parse_int, parse_month

MONTH_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])$"
# Pages past the last one are a 404 (no such page); this only keeps the offset a number the
# database can hold.
MAX_PAGE = 1_000_000


def invalid(name: str, message: str) -> serializers.ValidationError:
    return serializers.ValidationError({name: [message]})


def query_int(request: Request, name: str, *, default: int, minimum: int, maximum: int) -> int:
    """The query parameter ``name`` as a bounded whole number (``default`` when absent)."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return parse_int(raw, minimum=minimum, maximum=maximum)
    except ValueError as exc:
        raise invalid(name, str(exc)) from None


def page_number(request: Request, name: str = "page") -> int | str:
    """``?page=N`` as a number from 1 to MAX_PAGE, or the word ``last`` (which DRF's paginator
    resolves); 1 when absent."""
    raw = request.query_params.get(name)
    if raw == "last":
        return raw
    return query_int(request, name, default=1, minimum=1, maximum=MAX_PAGE)


@extend_schema_field({"type": "string", "pattern": MONTH_PATTERN, "example": "2025-01"})
class MonthField(serializers.CharField):
    """``YYYY-MM``, a month the calendar holds (0001-01 … 9999-11); the value stays the text."""

    def to_internal_value(self, data: Any) -> str:
        text = super().to_internal_value(data)
        try:
            first = parse_month(text)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return f"{first.year:04d}-{first.month:02d}"
