"""The quota request and reservation pages: forms with clear errors, decisions, ownership."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.quotas.models import QuotaGrant, QuotaRequest
from apps.reservations.models import Reservation
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def local(delta: timedelta) -> str:
    return (timezone.localtime() + delta).strftime("%Y-%m-%dT%H:%M")


def ask_form(portal: Portal, **kw: str) -> dict[str, str]:
    form = {
        "team": str(portal.cast.team.pk),
        "gpu_class": str(portal.cast.gpu_class.pk),
        "kind": "team",
        "amount": "16",
        "starts_at": local(timedelta(hours=1)),
        "ends_at": local(timedelta(days=14)),
        "justification": "Paper deadline",
    }
    form.update(kw)
    return form


def test_ask_in_the_portal_then_an_admin_approves_with_a_comment(portal: Portal) -> None:
    owner = portal.client(portal.cast.owner)
    response = owner.post("/quota-requests/", ask_form(portal))
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert request.amount_milli == 16000
    page = owner.get(f"/quota-requests/{request.pk}/")
    assert b"Record decision" not in page.content  # the asker does not decide
    admin = portal.client(portal.cast.admin)
    listing = admin.get("/quota-requests/").content.decode()
    assert "Waiting for your decision" in listing and f"#{request.pk}" in listing
    decided = admin.post(
        f"/quota-requests/{request.pk}/", {"decision": "approve", "comment": "Fine."}
    )
    assert decided.status_code == 302
    assert QuotaGrant.objects.get().amount_milli == 16000
    shown = owner.get(f"/quota-requests/{request.pk}/").content.decode()
    assert "approved by admin" in shown and "“Fine.”" in shown and "starts" in shown


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"amount": "-3"}, "A positive number of GPUs"),
        ({"amount": "lots"}, "A positive number of GPUs"),
        ({"ends_at": "2000-01-01T00:00"}, "The end must be after the start."),
        ({"justification": ""}, "This field is required."),
        ({"team": "999999"}, "Select a valid choice."),
        ({"kind": "user"}, "no per-user cap"),
    ],
)
def test_bad_requests_are_form_errors_not_500(
    portal: Portal, patch: dict[str, str], message: str
) -> None:
    response = portal.client(portal.cast.owner).post("/quota-requests/", ask_form(portal, **patch))
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_a_request_above_capacity_shows_it_to_the_decider(portal: Portal) -> None:
    portal.client(portal.cast.owner).post("/quota-requests/", ask_form(portal, amount="30"))
    request = QuotaRequest.objects.get()
    page = portal.client(portal.cast.admin).get(f"/quota-requests/{request.pk}/").content.decode()
    assert "Above available capacity: only 24 GPU of H100-80GB" in page


def test_outsiders_get_404_for_another_teams_request_and_cannot_ask_for_it(
    portal: Portal,
) -> None:
    portal.client(portal.cast.owner).post("/quota-requests/", ask_form(portal))
    request = QuotaRequest.objects.get()
    outsider = portal.client(portal.cast.outsider)
    assert outsider.get(f"/quota-requests/{request.pk}/").status_code == 404
    assert (
        outsider.post(f"/quota-requests/{request.pk}/", {"decision": "approve"}).status_code == 404
    )
    assert outsider.post(f"/quota-requests/{request.pk}/withdraw/").status_code == 404
    refused = outsider.post("/quota-requests/", ask_form(portal))
    assert refused.status_code == 400 and "Select a valid choice." in refused.content.decode()
    assert QuotaRequest.objects.get().state == QuotaRequest.State.PENDING


def book_form(portal: Portal, **kw: str) -> dict[str, str]:
    start = timezone.localtime().replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    form = {
        "team": str(portal.cast.team.pk),
        "gpu_class": str(portal.cast.gpu_class.pk),
        "count": "8",
        "size": "1",
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": (start + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M"),
        "note": "Workshop",
    }
    form.update(kw)
    return form


def test_book_on_the_calendar_page_and_see_the_hours_taken(portal: Portal) -> None:
    lead = portal.client(portal.cast.lead)
    page = lead.get("/reservations/").content.decode()
    assert "Free A100-80GB-MIG GPUs per hour" in page  # the first class by name
    assert lead.post("/reservations/", book_form(portal)).status_code == 302
    r = Reservation.objects.get()
    assert r.state == Reservation.State.APPROVED and r.total_milli == 8000
    shown = lead.get(f"/reservations/?gpu_class={portal.cast.gpu_class.pk}").content.decode()
    assert "cal cal-0" not in shown and 'title="' in shown and "8 GPU H100-80GB" in shown
    refused = lead.post("/reservations/", book_form(portal, count="17"))
    assert refused.status_code == 400
    assert "Only 16 GPU of H100-80GB is free" in refused.content.decode()
    fraction = lead.post("/reservations/", book_form(portal, size="0.25"))
    assert "This class is not shared: book whole GPUs." in fraction.content.decode()


def test_members_cannot_book_and_admins_decide_big_bookings(portal: Portal) -> None:
    member = portal.client(portal.cast.owner)
    assert b"Book</button>" not in member.get("/reservations/").content
    assert member.post("/reservations/", book_form(portal)).status_code == 400
    lead = portal.client(portal.cast.lead)
    lead.post("/reservations/", book_form(portal, count="12"))
    r = Reservation.objects.get()
    assert r.state == Reservation.State.PENDING
    assert lead.post(f"/reservations/{r.pk}/decide/", {"decision": "approve"}).status_code == 302
    r.refresh_from_db()
    assert r.state == Reservation.State.PENDING  # leads cannot
    outsider = portal.client(portal.cast.outsider)
    assert outsider.post(f"/reservations/{r.pk}/withdraw/").status_code == 404
    admin = portal.client(portal.cast.admin)
    admin.post(f"/reservations/{r.pk}/decide/", {"decision": "approve", "comment": "ok"})
    r.refresh_from_db()
    assert r.state == Reservation.State.APPROVED
    lead.post(f"/reservations/{r.pk}/withdraw/")
    r.refresh_from_db()
    assert r.state == Reservation.State.CANCELLED


def test_the_calendar_takes_odd_input_without_a_500(portal: Portal) -> None:
    lead = portal.client(portal.cast.lead)
    for query in [
        "?gpu_class=abc",
        "?day=never",
        "?gpu_class=99999&day=2026-13-45",
        "?day=1900-01-01",
    ]:
        assert lead.get("/reservations/" + query).status_code == 200, query
