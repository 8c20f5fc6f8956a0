"""Attacks with bad input that used to be answered with 500: a Unicode digit as the page, and
months at the ends of the calendar, on the usage API, the team usage API and the chargeback
page. The API answers 400 in its error shape naming the parameter; the portal gives the page
back with a message."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.common.parsing import parse_int, parse_month
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

BAD_MONTHS = ["9999-12", "0000-01", "2025-13", "2025-00", "junk", "²０２５-01", "٢٠٢٥-01", "2025-1"]


def _api(cast: Cast) -> APIClient:
    client = APIClient()
    client.force_authenticate(cast.owner)
    return client


@pytest.mark.parametrize("month", BAD_MONTHS)
@pytest.mark.parametrize("path", ["/api/v1/usage/", "/api/v1/teams/{team}/usage/"])
def test_usage_api_answers_400_to_a_month_outside_the_calendar(
    cast: Cast, path: str, month: str
) -> None:
    response = _api(cast).get(path.format(team=cast.team.slug), {"month": month})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid"
    assert "month" in body["fields"]


@pytest.mark.parametrize("path", ["/api/v1/usage/", "/api/v1/teams/{team}/usage/"])
def test_usage_api_still_takes_the_last_month_the_calendar_holds(cast: Cast, path: str) -> None:
    response = _api(cast).get(path.format(team=cast.team.slug), {"month": "9999-11"})
    assert response.status_code == 200
    assert response.json()["end"] == "9999-12-01"


@pytest.mark.parametrize("page", ["²", "١", "1.5", "abc", "0", "-1", "99999999999999999999999"])
def test_workload_list_answers_400_to_a_page_that_is_not_a_plain_number(
    cast: Cast, page: str
) -> None:
    response = _api(cast).get("/api/v1/workloads/", {"page": page})
    assert response.status_code == 400, response.content
    assert "page" in response.json()["fields"]


@pytest.mark.parametrize("path", ["/api/v1/usage/", "/api/v1/teams/{team}/usage/"])
def test_usage_api_ignores_a_unicode_page(cast: Cast, path: str) -> None:
    response = _api(cast).get(path.format(team=cast.team.slug), {"page": "²"})
    assert response.status_code == 200


def test_workload_list_past_the_last_page_is_404_and_last_still_works(cast: Cast) -> None:
    client = _api(cast)
    assert client.get("/api/v1/workloads/", {"page": "1000000"}).status_code == 404
    assert client.get("/api/v1/workloads/", {"page": "last"}).status_code == 200


@pytest.mark.parametrize("month", BAD_MONTHS)
def test_chargeback_page_shows_an_error_for_a_month_outside_the_calendar(
    cast: Cast, month: str
) -> None:
    client = Client()
    client.force_login(cast.admin)
    for extra in ({}, {"format": "csv"}, {"page": "²"}):
        response = client.get("/usage/chargeback/", {"month": month, **extra})
        assert response.status_code == 400
        assert response["Content-Type"].startswith("text/html")
        assert b'role="alert"' in response.content
        assert b"YYYY-MM" in response.content or b"calendar" in response.content


def test_chargeback_page_ignores_a_unicode_page(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    assert client.get("/usage/chargeback/", {"page": "²"}).status_code == 200


def test_template_id_in_unicode_digits_is_not_found(cast: Cast) -> None:
    client = Client()
    client.force_login(cast.owner)
    assert client.get("/workloads/new/notebook/", {"template": "١"}).status_code == 404
    assert client.get("/workloads/new/notebook/", {"template": "²"}).status_code == 404


@pytest.mark.parametrize("text", ["²", "١٢", "1_000", " ", "", "+1", "1e3", "9" * 19])
def test_parse_int_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError):
        parse_int(text)


def test_parse_month_bounds() -> None:
    assert parse_month("0001-01").year == 1
    assert parse_month("9999-11").month == 11
    for text in BAD_MONTHS:
        with pytest.raises(ValueError):
            parse_month(text)


@pytest.mark.parametrize("team", ["a\x00b", "²", "no such/team", "x" * 300])
def test_chargeback_page_shows_an_error_for_a_team_that_is_not_a_slug(
    cast: Cast, team: str
) -> None:
    """Found by the form fuzz: a NUL in ?team= reached PostgreSQL (500)."""
    client = Client(raise_request_exception=False)
    client.force_login(cast.admin)
    response = client.get("/usage/chargeback/", {"team": team})
    assert response.status_code == 400
    assert b'role="alert"' in response.content


@pytest.mark.parametrize("text", ["²", "lr", "lr=", "lr= ", "=1..2", "lr=1..", "lr=a..b"])
def test_sweep_ranges_that_are_not_ranges_are_a_form_error_not_a_500(text: str) -> None:
    from django import forms

    from apps.web.forms.workloads import parse_ranges

    with pytest.raises(forms.ValidationError):
        parse_ranges(text)


@pytest.mark.parametrize(
    "thresholds", ["²", "50, ²", "٥٠", "１００", "50,,80", "-5", "1e2", "5" * 5]
)
def test_budget_thresholds_with_unicode_digits_are_a_form_error_not_a_500(
    cast: Cast, thresholds: str
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(cast.admin)
    response = client.post(
        f"/teams/{cast.team.slug}/budget/set/",
        {"month": "2026-11", "amount": "100", "thresholds": thresholds},
    )
    assert response.status_code < 500, response.content[:300]
    if thresholds != "50,,80":
        assert b"whole percentages" in response.content or b"Threshold" in response.content


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("amount", "²"),
        ("amount", "NaN"),
        ("amount", "Infinity"),
        ("amount", "1e999999"),
        ("month", "²０２６-11"),
    ],
)
def test_budget_numbers_in_any_script_are_a_form_error_not_a_500(
    cast: Cast, field: str, value: str
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(cast.admin)
    data = {"month": "2026-11", "amount": "100", "thresholds": "50, 80", field: value}
    response = client.post(f"/teams/{cast.team.slug}/budget/set/", data)
    assert response.status_code < 500, response.content[:300]


@pytest.mark.parametrize("value", ["²", "NaN", "Infinity", "-0", "1e9999", "٣"])
def test_quota_and_policy_numbers_in_any_script_are_a_form_error_not_a_500(
    cast: Cast, value: str
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(cast.admin)
    quota = {
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "guaranteed": value,
        "limit": value,
        "per_user_cap": value,
    }
    assert client.post("/overview/quotas/", quota).status_code < 500
    policy = {
        "max_gpus": value,
        "max_runtime_notebook_hours": value,
        "idle_timeout_notebook_minutes": value,
    }
    assert client.post(f"/teams/{cast.team.slug}/policy/set/", policy).status_code < 500
    assert client.get("/overview/advice/", {"days": value}).status_code < 500
    advice = {"team": cast.team.slug, "gpu_class": cast.gpu_class.name, "days": value}
    assert client.post("/overview/advice/apply/", advice).status_code < 500
