"""``gpupaas quota-request`` and ``gpupaas reservation`` against the live test server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from apps.quotas.models import QuotaGrant, QuotaRequest
from apps.reservations.models import Reservation
from gpupaas_cli import exits
from gpupaas_cli.main import parse_gpus
from tests.cli.test_cli_live import CliFor
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db(transaction=True)


def test_gpu_amounts_parse_to_milli_gpu() -> None:
    assert parse_gpus("16") == 16000 and parse_gpus("0.25") == 250


def test_ask_list_and_approve_a_quota_request(cast: Cast, cli_for: CliFor) -> None:
    owner, admin = cli_for(cast.owner), cli_for(cast.admin)
    base = ["--team", cast.team.slug, "--gpu-class", cast.gpu_class.name]
    asked = owner(
        "quota-request", "ask", *base, "--gpus", "16", "--hours", "336", "--why", "deadline"
    )
    assert asked.exit_code == 0, asked.output
    assert "16 GPU of H100-80GB for vision (team)" in asked.stdout and "pending" in asked.stdout
    request = QuotaRequest.objects.get()
    listed = owner("quota-request", "list")
    assert listed.exit_code == 0 and f"{request.pk}" in listed.stdout and "pending" in listed.stdout
    lead = cli_for(cast.lead)("quota-request", "approve", str(request.pk))
    assert lead.exit_code == exits.FORBIDDEN, lead.output
    assert "Platform admins decide team quotas." in lead.stderr
    ok = admin("quota-request", "approve", str(request.pk), "--comment", "Fine.", "--json")
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["state"] == "approved"
    assert QuotaGrant.objects.get().amount_milli == 16000
    bad = owner("quota-request", "ask", *base, "--gpus", "-1", "--hours", "2", "--why", "x")
    assert bad.exit_code == exits.USAGE and "positive number of GPUs" in bad.stderr
    both = owner("quota-request", "ask", *base, "--gpus", "1", "--why", "x")
    assert both.exit_code == exits.USAGE and "--end or --hours" in both.stderr


def test_book_show_the_calendar_and_be_refused_above_capacity(cast: Cast, cli_for: CliFor) -> None:
    lead = cli_for(cast.lead)
    start = (datetime.now(UTC) + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    base = ["--team", cast.team.slug, "--gpu-class", cast.gpu_class.name]
    when = ["--start", start.isoformat(), "--hours", "3"]
    booked = lead("reservation", "book", *base, "--count", "8", *when, "--note", "workshop")
    assert booked.exit_code == 0, booked.output
    assert "8 GPU of H100-80GB for vision" in booked.stdout and "approved" in booked.stdout
    refused = lead("reservation", "book", *base, "--count", "17", *when)
    assert refused.exit_code == exits.INVALID, refused.output
    assert "Only 16 GPU of H100-80GB is free" in refused.stderr
    calendar = lead(
        "reservation",
        "calendar",
        "--gpu-class",
        cast.gpu_class.name,
        "--start",
        start.isoformat(),
        "--hours",
        "4",
        "--json",
    )
    assert calendar.exit_code == 0, calendar.output
    rows = json.loads(calendar.stdout)
    assert [r["free_milli"] for r in rows] == [16000, 16000, 16000, 24000]
    r = Reservation.objects.get()
    shown = lead("reservation", "show", str(r.pk))
    assert "Held 0.0 GPU-hours so far" in shown.stdout
    gone = lead("reservation", "withdraw", str(r.pk))
    assert gone.exit_code == 0 and "cancelled" in gone.stdout
    outsider = cli_for(cast.outsider)("reservation", "show", str(r.pk))
    assert outsider.exit_code == exits.NOT_FOUND
