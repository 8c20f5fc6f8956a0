"""Fuzz pass of every route of the portal (hypothesis): each URL pattern outside the API (which
schemathesis covers, tests/api/test_schema.py) and Django's own admin (whose governance forms
are in test_fuzz_portal.py), its parameters filled with real objects (a training job, a
notebook and an inference endpoint for a workload's routes, each kind for the request form's),
asked with GET and with POST by a member and by a platform admin, with junk query strings and
form bodies. No answer may be a 5xx; requests and 5xx are counted in the terminal summary
(tests/plugins/fuzz.py). The routes are read from the URL configuration, so a new one is swept
without being listed here; one whose parameter has no value below fails."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.quotas.models import QuotaRequest
from apps.reservations.models import Reservation
from apps.web.forms.workloads import REQUEST_FORMS
from apps.workloads import core
from apps.workloads.models import RequestTemplate
from tests.plugins import fuzz
from tests.portal.conftest import Portal
from tests.security.test_fuzz_portal import JUNK

pytestmark = pytest.mark.django_db

PASS = "portal routes (every route, GET and POST)"
EXAMPLES = 3  # per route, parameter value, user and method

# Outside this pass, each for a reason.
SKIPPED_PREFIXES = {
    "api/": "the API: every operation fuzzed by schemathesis (tests/api/test_schema.py)",
    "admin/": "Django's admin: its governance forms are fuzzed in test_fuzz_portal.py",
}
SKIPPED = {
    "readyz": "answers 503 by design while a dependency is down (tests/platform/test_health.py)",
}

# Names the portal's forms and views read, sent with junk values (or left out).
FIELDS = [
    "action",
    "name",
    "team",
    "gpu_class",
    "gpu_milli",
    "replicas",
    "image",
    "env",
    "command",
    "next",
    "id",
    "ids",
    "page",
    "month",
    "days",
    "scope",
    "value",
    "decision",
    "comment",
    "reason",
    "kind",
    "format",
    "model_path",
    "model_uri",
]
DATA = st.fixed_dictionaries(
    {}, optional={name: st.one_of(JUNK, st.lists(JUNK, max_size=2)) for name in FIELDS}
)

PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for entry in patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, route)
        elif isinstance(entry, URLPattern):
            yield route


def portal_routes() -> list[str]:
    """Every route of the URL configuration this pass sweeps."""
    return sorted(
        route
        for route in set(_routes(get_resolver().url_patterns))
        if not route.startswith(tuple(SKIPPED_PREFIXES)) and route not in SKIPPED
    )


def _values(portal: Portal) -> dict[str, list[str]]:
    """The values each route parameter is swept with (real objects of the cast's team)."""
    cast = portal.cast
    now = timezone.now()
    workloads = [
        portal.workload(name="fuzz-job", state=core.RUNNING),
        portal.workload(
            name="fuzz-notebook",
            kind=core.KIND_NOTEBOOK,
            priority_class=core.PRIORITY_DEVELOPMENT,
            image=portal.notebook_image,
            state=core.RUNNING,
        ),
        portal.workload(
            name="fuzz-endpoint",
            kind=core.KIND_INFERENCE,
            priority_class=core.PRIORITY_PRODUCTION,
            state=core.RUNNING,
        ),
    ]
    template = RequestTemplate.objects.create(
        name="fuzz", owner=cast.owner, kind=core.KIND_TRAINING, values={}
    )
    pending = QuotaRequest.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.owner,
        amount_milli=1000,
        starts_at=now,
        ends_at=now + timedelta(days=1),
        justification="fuzz",
    )
    booking = Reservation.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.lead,
        total_milli=1000,
        starts_at=now + timedelta(days=1),
        ends_at=now + timedelta(days=2),
    )
    token, _ = api_token_create(actor=cast.owner, name="fuzz", scopes=["read"], expires_at=None)
    return {
        "workload_id": [str(w.pk) for w in workloads],
        "kind": list(REQUEST_FORMS),
        "slug": [cast.team.slug],
        "template_id": [str(template.pk)],
        "request_id": [str(pending.pk)],
        "reservation_id": [str(booking.pk)],
        "token_id": [str(token.pk)],
        "key_id": ["1"],
        "forwarded": ["lab/tree", "../../etc/passwd"],
    }


def _paths(route: str, values: dict[str, list[str]]) -> list[str]:
    """``route`` with each of its parameters' values (every combination)."""
    paths = ["/" + route]
    for match in PARAMETER.finditer(route):
        name = match.group("name")
        assert name in values, f"route {route!r}: no value to sweep its parameter {name!r}"
        paths = [p.replace(match.group(0), value, 1) for p in paths for value in values[name]]
    return paths


def test_every_portal_route_is_swept() -> None:
    """The sweep reads the routes from the URL configuration; a skip names one that exists."""
    every = set(_routes(get_resolver().url_patterns))
    assert set(SKIPPED) <= every
    assert all(any(r.startswith(prefix) for r in every) for prefix in SKIPPED_PREFIXES)
    swept = set(portal_routes())
    assert every - swept == {
        r for r in every if r.startswith(tuple(SKIPPED_PREFIXES)) or r in SKIPPED
    }
    assert len(swept) > 50


def _ask(client: Client, method: str, path: str, data: dict[str, Any]) -> int:
    response = client.get(path, data) if method == "get" else client.post(path, data)
    if getattr(response, "streaming", False):
        b"".join(response.streaming_content)  # the stream's own code runs as it is read
    status: int = response.status_code
    return status


def _sweep(user: User, method: str, path: str) -> None:
    """EXAMPLES requests of ``method`` to ``path`` as ``user``, each with junk data."""
    client = Client(raise_request_exception=False)  # a crash is counted as the 500 it is

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=DATA)
    def run(data: dict[str, Any]) -> None:
        client.force_login(user)  # a sign-out route may have ended the last session
        status = _ask(client, method, path, data)
        fuzz.record(PASS, status)
        assert status < 500, (method, path, user.username, data)

    run()


@pytest.mark.parametrize("route", portal_routes())
def test_portal_route_never_answers_5xx(portal: Portal, route: str) -> None:
    paths = _paths(route, _values(portal))
    for user in (portal.cast.owner, portal.cast.admin):
        for path in paths:
            for method in ("get", "post"):
                _sweep(user, method, path)
