"""The API's JSON renderer and parser (orjson) against DRF's own, on the data the API sends."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer

from apps.api.renderers import FastJSONParser, FastJSONRenderer

DATA: list[Any] = [
    {"count": 2, "next": None, "results": [{"id": 1, "env": {"A": "ü"}, "args": []}]},
    {"at": datetime(2026, 11, 30, 3, 30, 44, 257111, tzinfo=UTC)},
    {"at": datetime(2026, 11, 30, 3, 30, 44, tzinfo=UTC)},  # no microseconds: none written
    {"at": datetime(2026, 11, 30, 4, 30, tzinfo=timezone(timedelta(hours=1)))},
    {"day": date(2026, 11, 30), "cost": Decimal("12.50"), "id": uuid.UUID(int=7)},
    {"message": gettext_lazy("Not found."), "nested": ({"x": 1.5},), "tags": ["a", "b"]},
    {1: "integer keys", "text": "line\u2028separator"},
    [],
]


@pytest.mark.parametrize("data", DATA, ids=range(len(DATA)))
def test_fast_renderer_writes_what_drf_writes(data: Any) -> None:
    ours = json.loads(FastJSONRenderer().render(data))
    theirs = json.loads(JSONRenderer().render(data))
    assert ours == theirs


def test_fast_renderer_writes_utc_as_z_like_drf() -> None:
    body = FastJSONRenderer().render({"at": datetime(2026, 1, 1, tzinfo=UTC)})
    assert body == b'{"at":"2026-01-01T00:00:00Z"}'


def test_indented_rendering_is_left_to_drf() -> None:
    body = FastJSONRenderer().render({"a": 1}, "application/json; indent=2", {})
    assert body == b'{\n  "a": 1\n}'


def test_nothing_renders_as_an_empty_body() -> None:
    assert FastJSONRenderer().render(None) == b""


def test_fast_parser_reads_what_drf_reads() -> None:
    raw = b'{"name": "r\\u00e9sum\\u00e9", "grid": {"lr": ["0.1"]}, "n": 2}'
    assert FastJSONParser().parse(io.BytesIO(raw)) == JSONParser().parse(io.BytesIO(raw))


@pytest.mark.parametrize("raw", [b"{not json", b'{"a": NaN}', b"\xff"])
def test_fast_parser_refuses_what_is_not_json(raw: bytes) -> None:
    with pytest.raises(ParseError, match="JSON parse error"):
        FastJSONParser().parse(io.BytesIO(raw))
