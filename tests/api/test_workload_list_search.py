"""The API list's search (name, image, command, arguments), date range and sort."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from apps.workloads import core
from tests.api.conftest import Client
from tests.api.test_workloads_api import workload_of
from tests.factories import ImageFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def three(cast: Cast) -> Cast:
    hf = ImageFactory(name="HF transformers", reference="ghcr.io/huggingface/transformers:4.46")
    workload_of(cast, name="alpha", created_at=datetime(2026, 3, 1, 23, 59, tzinfo=UTC))
    workload_of(
        cast,
        name="bravo",
        image=hf,
        command=["accelerate", "launch", "finetune.py"],
        args=["--lr", "3e-5"],
        state=core.SUCCEEDED,
        created_at=datetime(2026, 3, 2, 0, 0, tzinfo=UTC),
    )
    workload_of(
        cast, name="charlie", state=core.FAILED, created_at=datetime(2026, 3, 3, 12, tzinfo=UTC)
    )
    return cast


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("search=huggingface", ["bravo"]),
        ("search=hf%20trans", ["bravo"]),
        ("search=FINETUNE", ["bravo"]),
        ("search=3e-5", ["bravo"]),
        ("search=train.py", ["charlie", "alpha"]),  # the factory's command
        ("created_from=2026-03-02", ["charlie", "bravo"]),
        ("created_to=2026-03-01", ["alpha"]),
        ("created_from=2026-03-02&created_to=2026-03-02", ["bravo"]),
        ("sort=name", ["alpha", "bravo", "charlie"]),
        ("sort=-name", ["charlie", "bravo", "alpha"]),
        ("sort=created", ["alpha", "bravo", "charlie"]),
        ("sort=state&state=failed,succeeded", ["charlie", "bravo"]),
    ],
)
def test_search_dates_and_sort(three: Cast, api: Client, query: str, names: list[str]) -> None:
    response = api(three.owner).get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 200, response.content
    assert [w["name"] for w in response.json()["results"]] == names


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("created_from=2026-13-01", "created_from"),
        ("created_to=yesterday", "created_to"),
        ("created_from=2026-03-05&created_to=2026-03-01", "created_to"),
        ("sort=cost", "sort"),
        ("search=" + "x" * 101, "search"),
    ],
)
def test_bad_list_parameters_are_400s_naming_the_field(
    three: Cast, api: Client, query: str, field: str
) -> None:
    response = api(three.owner).get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400
    body: dict[str, Any] = response.json()
    assert field in body["fields"], body
