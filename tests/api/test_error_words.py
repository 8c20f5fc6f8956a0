"""API errors are words, never Python reprs: nested field errors (a list of secret references,
a grid's values) and list details are joined into readable messages."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import exceptions

from tests.api.conftest import Client
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def body(cast: Cast, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "kind": "training",
        "name": "resnet",
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
    }
    values.update(overrides)
    return values


@pytest.mark.parametrize(
    "overrides",
    [
        {"secrets": [{"name": ["not", "text"], "env": {"x": 1}}]},
        {"kind": "sweep", "grid": {"lr": [["nested"]]}},
        {"env": {"A": ["list"]}},
        {"args": [{"a": 1}]},
    ],
)
def test_nested_field_errors_are_words_not_reprs(
    cast: Cast, api: Client, overrides: dict[str, Any]
) -> None:
    response = api(cast.owner).post("/api/v1/workloads/", body(cast, **overrides), "json")
    assert response.status_code == 400, response.json()
    text = response.content.decode()
    assert "ErrorDetail" not in text and "string=" not in text
    assert response.json()["message"]
    for messages in response.json()["fields"].values():
        assert all(isinstance(m, str) and m and not m.startswith(("{", "[")) for m in messages)


def test_detail_text_joins_lists_and_dicts_of_error_details() -> None:
    from apps.api.base import detail_text  # after the API's settings are loaded

    detail = exceptions.ValidationError({"a": ["first"], "b": {"c": ["second"]}}).detail
    assert detail_text(detail) == "a: first b: c: second"
    assert detail_text(exceptions.PermissionDenied(["one", "two"]).detail) == "one two"
