"""Quota requests and reservations over the API: the flows, and clear 4xx for bad input."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.quotas.models import QuotaGrant
from tests.api.conftest import Client
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def iso(delta: timedelta) -> str:
    return (timezone.now() + delta).isoformat()


def test_ask_then_approve_over_the_api(cast: Cast, api: Client) -> None:
    body = {
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "amount_milli": 30000,
        "starts_at": iso(timedelta(hours=1)),
        "ends_at": iso(timedelta(days=14)),
        "justification": "Paper deadline",
    }
    created = api(cast.owner).post("/api/v1/quota-requests/", body, format="json")
    assert created.status_code == 201, created.content
    request = created.json()
    assert request["state"] == "pending" and request["may_decide"] is False
    # Above what is free (32 GPUs less 8 guaranteed): said before anyone approves.
    assert "Above available capacity: only 24 GPU" in request["capacity_note"]
    seen = api(cast.admin).get(f"/api/v1/quota-requests/{request['id']}/").json()
    assert seen["may_decide"] is True
    refused = api(cast.lead).post(
        f"/api/v1/quota-requests/{request['id']}/decide/", {"approve": True}, format="json"
    )
    assert refused.status_code == 403
    assert refused.json()["message"] == "Platform admins decide team quotas."
    decided = api(cast.admin).post(
        f"/api/v1/quota-requests/{request['id']}/decide/",
        {"approve": True, "comment": "Capacity arrives Monday."},
        format="json",
    )
    assert decided.status_code == 200 and decided.json()["state"] == "approved"
    assert QuotaGrant.objects.get().amount_milli == 30000
    assert AuditEvent.objects.filter(action="quota_request.approve").count() == 1
    mine = api(cast.owner).get("/api/v1/quota-requests/?state=approved").json()
    assert [r["id"] for r in mine] == [request["id"]]
    assert api(cast.outsider).get("/api/v1/quota-requests/").json() == []


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"amount_milli": 0}, "amount_milli"),
        ({"amount_milli": "lots"}, "amount_milli"),
        ({"gpu_class": "H900\n<script>"}, "gpu_class"),
        ({"starts_at": "tomorrow"}, "starts_at"),
        ({"ends_at": "2000-01-01T00:00:00Z"}, "ends_at"),
        ({"kind": "everything"}, "kind"),
        ({"justification": "x" * 5000}, "justification"),
    ],
)
def test_bad_quota_requests_get_400_naming_the_field(
    cast: Cast, api: Client, patch: dict[str, object], field: str
) -> None:
    body: dict[str, object] = {
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "amount_milli": 1000,
        "starts_at": iso(timedelta(hours=1)),
        "ends_at": iso(timedelta(days=2)),
        "justification": "why",
        **patch,
    }
    response = api(cast.owner).post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"], response.json()


def test_book_see_the_calendar_and_the_refusal_over_the_api(cast: Cast, api: Client) -> None:
    start = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    body = {
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "count": 8,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=3)).isoformat(),
        "note": "Thursday workshop",
    }
    lead = api(cast.lead)
    booked = lead.post("/api/v1/reservations/", body, format="json")
    assert booked.status_code == 201 and booked.json()["state"] == "approved"
    big = lead.post("/api/v1/reservations/", {**body, "count": 16}, format="json")
    assert big.status_code == 201 and big.json()["state"] == "pending"
    refused = lead.post("/api/v1/reservations/", {**body, "count": 1}, format="json")
    assert refused.status_code == 400
    assert "Only 0 GPU of H100-80GB is free" in refused.json()["fields"]["count"][0]
    member = api(cast.owner).post("/api/v1/reservations/", body, format="json")
    assert member.status_code == 403
    hours = lead.get(
        "/api/v1/reservations/calendar/",
        {"gpu_class": cast.gpu_class.name, "start": start.isoformat(), "hours": 4},
    ).json()
    assert [(h["free_milli"], h["booked_milli"]) for h in hours] == [
        (0, 24000),
        (0, 24000),
        (0, 24000),
        (24000, 0),
    ]
    detail = lead.get(f"/api/v1/reservations/{booked.json()['id']}/").json()
    assert detail["reserved_gpu_hours"] == 0.0  # the window has not begun
    for query, field in [
        ({"gpu_class": "nope"}, "gpu_class"),
        ({}, "gpu_class"),
        ({"gpu_class": cast.gpu_class.name, "hours": "9999"}, "hours"),
        ({"gpu_class": cast.gpu_class.name, "start": "soon"}, "start"),
        ({"gpu_class": cast.gpu_class.name, "start": "9999-12-31T23:00:00Z"}, "start"),
    ]:
        bad = lead.get("/api/v1/reservations/calendar/", query)
        assert bad.status_code == 400 and field in bad.json()["fields"], bad.content
