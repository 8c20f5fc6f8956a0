"""The OpenAPI description: valid, complete, and true to the running API (schemathesis).

The fuzz pass calls every operation of the document (every path and method) with a lead's
write token, with valid and invalid inputs (schemathesis' examples and fuzzing phases,
positive and negative), and fails on any 5xx; the requests sent and 5xx seen are counted in
the terminal summary (tests/plugins/fuzz.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
import yaml
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.test import APIClient
from schemathesis.specs.openapi import checks as openapi_checks

from apps.accounts.services import api_token_create
from apps.workloads import core
from gpupaas.wsgi import application
from tests.factories import WorkloadFactory
from tests.plugins import fuzz
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def document(db: None) -> dict[str, Any]:
    response = APIClient().get("/api/schema/")
    assert response.status_code == 200
    return yaml.safe_load(response.content)


def test_schema_and_docs_are_served_without_signing_in(document: dict[str, Any]) -> None:
    assert document["openapi"].startswith("3.")
    assert document["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    docs = APIClient().get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
    # The interactive docs load their assets from the portal itself, not from the internet.
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs.content
    assert b"https://" not in docs.content.split(b"<body")[0]


def test_every_operation_has_a_summary_examples_and_the_error_shape(
    document: dict[str, Any],
) -> None:
    operations = [
        (path, method, op)
        for path, item in document["paths"].items()
        for method, op in item.items()
    ]
    assert len(operations) >= 20
    error_ref = "#/components/schemas/Error"
    for path, method, op in operations:
        where = f"{method.upper()} {path}"
        assert op.get("summary"), where
        responses = op["responses"]
        for status in ("401", "429"):
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": error_ref}, where
        success = next(r for s, r in responses.items() if s.startswith("2"))
        if "content" in success:
            media = next(iter(success["content"].values()))
            assert media.get("examples") or media.get("example"), f"{where}: no example"
        body = op.get("requestBody")
        if body and method == "post":
            media = body["content"]["application/json"]
            assert media.get("examples"), f"{where}: no request example"
    error = document["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"code", "message", "fields"}


# --- schemathesis: the running app against its own schema ------------------------------------

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
# The coverage phase builds its cases for every operation at collection time (over a minute
# on two cores); the examples and fuzzing phases stay. What it found once — non-numeric ids
# answered with an HTML 404 — is pinned in test_guards.
schema.config.phases.coverage.enabled = False

CHECKS = [
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
    openapi_checks.response_headers_conformance,
]


@pytest.fixture
def in_process_wsgi() -> Iterator[None]:
    """Calling the WSGI app directly would close the test's database connection after each
    request (Django's request_finished handler); the test client avoids it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def seeded_token(cast: Cast, in_process_wsgi: None) -> str:
    """A lead's write token, with a few workloads whose ids the generator may hit."""
    for state in (core.RUNNING, core.SUSPENDED, core.SUCCEEDED):
        WorkloadFactory(
            team=cast.team,
            owner=cast.owner,
            gpu_class=cast.gpu_class,
            image=cast.image,
            state=state,
        )
    _, plaintext = api_token_create(actor=cast.lead, name="fuzz", scopes=["write"], expires_at=None)
    return plaintext


@schema.parametrize()
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_conforms_to_its_schema_and_never_fails(
    case: schemathesis.Case, seeded_token: str, settings: Any
) -> None:
    settings.API_RATE_LIMIT = "100000/min"
    headers = {"Authorization": f"Bearer {seeded_token}"}
    response = case.call(headers=headers)
    fuzz.record("API (schemathesis, every operation, lead's write token)", response.status_code)
    case.validate_response(
        response, checks=[schemathesis.checks.not_a_server_error, *CHECKS], headers=headers
    )
    assert response.status_code < 500
