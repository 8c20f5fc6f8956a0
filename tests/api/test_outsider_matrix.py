"""Every endpoint × method with another team's ids: the outsider gets 404 and changes nothing.
Also: a read-scoped token cannot write anywhere, and nobody gets in without credentials."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, Membership
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from apps.budgets.models import Budget
from apps.budgets.selectors import this_month
from apps.budgets.services import budget_set
from apps.credentials.models import Secret
from apps.datasets.models import Dataset
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice, NotificationPreference
from apps.notifications.services import notify
from apps.policies.models import TeamPolicy
from apps.quotas.models import QuotaRequest
from apps.reservations.models import Reservation
from apps.serving.models import EndpointKey
from apps.workloads import core
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.credentials.fakes import _fake_cluster  # noqa: F401
from tests.factories import ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_cluster")]

QUOTA_REQUEST_BODY = {
    "team": "vision",
    "gpu_class": "H100-80GB",
    "kind": "team",
    "amount_milli": 2000,
    "starts_at": "2030-01-01T00:00:00Z",
    "ends_at": "2030-01-08T00:00:00Z",
    "justification": "a deadline",
}
RESERVATION_BODY = {
    "team": "vision",
    "gpu_class": "H100-80GB",
    "count": 2,
    "starts_at": "2030-01-01T09:00:00Z",
    "ends_at": "2030-01-01T13:00:00Z",
}

# (method, path template, body) for every operation on an object that belongs to someone.
OBJECT_ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("get", "/api/v1/workloads/{workload}/", None),
    ("delete", "/api/v1/workloads/{workload}/", None),
    ("post", "/api/v1/workloads/{workload}/cancel/", {}),
    ("post", "/api/v1/workloads/{notebook}/suspend/", None),
    ("post", "/api/v1/workloads/{suspended}/resume/", None),
    ("post", "/api/v1/workloads/{workload}/clone/", {}),
    ("get", "/api/v1/workloads/{workload}/logs/", None),
    ("get", "/api/v1/workloads/{workload}/events/", None),
    ("get", "/api/v1/workloads/{sweep}/trials/", None),
    ("get", "/api/v1/workloads/{endpoint}/endpoint/", None),
    ("post", "/api/v1/workloads/{endpoint}/scale/", {"replicas": 1}),
    ("post", "/api/v1/workloads/{endpoint}/wake/", None),
    ("post", "/api/v1/workloads/{endpoint}/rollout/", {"env": {"DTYPE": "fp8"}}),
    ("get", "/api/v1/workloads/{endpoint}/keys/", None),
    ("post", "/api/v1/workloads/{endpoint}/keys/", {"name": "app"}),
    ("delete", "/api/v1/workloads/{endpoint}/keys/{endpoint_key}/", None),
    ("get", "/api/v1/teams/{team}/", None),
    ("get", "/api/v1/teams/{team}/members/", None),
    ("post", "/api/v1/teams/{team}/members/", {"username": "outsider", "role": "lead"}),
    ("delete", "/api/v1/teams/{team}/members/owner/", None),
    ("get", "/api/v1/teams/{team}/secrets/", None),
    ("post", "/api/v1/teams/{team}/secrets/", {"name": "new", "data": {"k": "v"}}),
    ("put", "/api/v1/teams/{team}/secrets/hf/", {"data": {"token": "rotated"}}),
    ("delete", "/api/v1/teams/{team}/secrets/hf/", None),
    ("get", "/api/v1/teams/{team}/datasets/", None),
    ("post", "/api/v1/teams/{team}/datasets/", {"name": "new", "kind": "claim", "claim": "c"}),
    ("delete", "/api/v1/teams/{team}/datasets/imagenet/", None),
    ("get", "/api/v1/teams/{team}/quotas/", None),
    ("get", "/api/v1/teams/{team}/usage/", None),
    ("get", "/api/v1/quotas/?team={team}", None),
    ("get", "/api/v1/teams/{team}/policy/", None),
    ("put", "/api/v1/teams/{team}/policy/", {"max_gpu_milli_per_workload": 1000}),
    ("get", "/api/v1/teams/{team}/budget/", None),
    ("put", "/api/v1/teams/{team}/budget/", {"amount": "100", "hard_stop": True}),
    ("post", "/api/v1/teams/{team}/budget/approve/", None),
    ("get", "/api/v1/tokens/{token}/", None),
    ("delete", "/api/v1/tokens/{token}/", None),
    ("get", "/api/v1/quota-requests/?team={team}", None),
    ("post", "/api/v1/quota-requests/", QUOTA_REQUEST_BODY),
    ("get", "/api/v1/quota-requests/{quota_request}/", None),
    ("post", "/api/v1/quota-requests/{quota_request}/decide/", {"approve": True, "comment": "ok"}),
    ("post", "/api/v1/quota-requests/{quota_request}/cancel/", None),
    ("get", "/api/v1/reservations/?team={team}", None),
    ("post", "/api/v1/reservations/", RESERVATION_BODY),
    ("get", "/api/v1/reservations/{reservation}/", None),
    ("post", "/api/v1/reservations/{reservation}/decide/", {"approve": True, "comment": "ok"}),
    ("post", "/api/v1/reservations/{reservation}/cancel/", None),
    ("post", "/api/v1/notifications/{notice}/read/", None),
]

# Written by platform admins only (the lead's side of the matrix is the admin's here).
ADMIN_WRITES = {"/policy/", "/budget/"}

COLLECTION_WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("post", "/api/v1/advice/apply/", {"team": "vision", "gpu_class": "H100-80GB"}),
    ("post", "/api/v1/workloads/", {"kind": "training", "name": "x"}),
    ("post", "/api/v1/workloads/validate/", {"kind": "training", "name": "x"}),
    ("post", "/api/v1/tokens/", {"name": "x", "scopes": ["read"]}),
    ("post", "/api/v1/notifications/read/", {}),
    (
        "put",
        "/api/v1/me/notification-preferences/",
        {"email_events": [], "webhook_events": [], "portal_events": [], "webhook_url": ""},
    ),
]

ALL_PATHS = [
    "/api/v1/me/",
    "/api/v1/workloads/",
    "/api/v1/workloads/validate/",
    "/api/v1/teams/",
    "/api/v1/quotas/",
    "/api/v1/gpu-classes/",
    "/api/v1/images/",
    "/api/v1/tokens/",
    "/api/v1/usage/",
    "/api/v1/quota-requests/",
    "/api/v1/reservations/",
    "/api/v1/reservations/calendar/",
    "/api/v1/notifications/",
    "/api/v1/notifications/read/",
    "/api/v1/me/notification-preferences/",
    "/api/v1/advice/",
    "/api/v1/advice/apply/",
]


def ids(cast: Cast) -> dict[str, Any]:
    """Objects of the cast's team (Vision), which the outsider (NLP) must not reach."""
    common = {"team": cast.team, "owner": cast.owner, "gpu_class": cast.gpu_class}
    token, _ = api_token_create(actor=cast.owner, name="owner's", scopes=["read"], expires_at=None)
    Secret.objects.create(team=cast.team, name="hf", keys=["token"], k8s_name="gpp-s-matrix")
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="imagenet-pvc")
    # A member's request for a higher cap (the team's lead decides it) and a booking above the
    # approval threshold (a platform admin decides it).
    cast.team.quotas.update(per_user_cap_milli=2000)
    later = timezone.now() + timedelta(days=1)
    quota_request = QuotaRequest.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.owner,
        kind=QuotaRequest.Kind.USER,
        amount_milli=1000,
        starts_at=later,
        ends_at=later + timedelta(days=7),
        justification="sweeps",
    )
    reservation = Reservation.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.lead,
        count=9,
        size_milli=1000,
        total_milli=9000,
        starts_at=later,
        ends_at=later + timedelta(hours=4),
    )
    endpoint = WorkloadFactory(
        **common,
        image=ImageFactory(name="vLLM", reference="docker.io/vllm/vllm-openai:v1", kind="serving"),
        kind=core.KIND_INFERENCE,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        params={
            "endpoint": {
                "min_replicas": 1,
                "max_replicas": 2,
                "target_replicas": 1,
                "model_path": "/team/models/m",
            }
        },
    )
    key = EndpointKey.objects.create(
        team=cast.team, endpoint_id=endpoint.pk, name="app", lookup="abcd", digest="0" * 64
    )
    return {
        "quota_request": quota_request.pk,
        "reservation": reservation.pk,
        "endpoint": endpoint.pk,
        "endpoint_key": key.pk,
        "workload": WorkloadFactory(**common, image=cast.image, state=core.RUNNING).pk,
        "notebook": WorkloadFactory(
            **common, image=cast.image, kind=core.KIND_NOTEBOOK, state=core.RUNNING
        ).pk,
        "suspended": WorkloadFactory(
            **common, image=cast.image, kind=core.KIND_NOTEBOOK, state=core.SUSPENDED
        ).pk,
        "sweep": WorkloadFactory(
            **common,
            image=cast.image,
            kind=core.KIND_SWEEP,
            state=core.QUEUED,
            params={"grid": {"lr": ["0.1"]}},
        ).pk,
        "team": cast.team.slug,
        "token": token.pk,
        "notice": _notice_of(cast),
    }


def _notice_of(cast: Cast) -> int:
    notify(
        event=NoticeEvent.FAILED,
        users=[cast.owner],
        title="resnet failed",
        body="",
        key="matrix-notice",
    )
    return Notice.objects.get(user=cast.owner, key="matrix-notice").pk


def snapshot() -> tuple[Any, ...]:
    return (
        sorted(Workload.objects.values_list("id", "state")),
        sorted(Membership.objects.values_list("user__username", "team__slug", "role")),
        sorted(ApiToken.objects.values_list("id", "revoked_at")),
        sorted(Secret.objects.values_list("id", "keys", "updated_at")),
        sorted(Dataset.objects.values_list("id", "name")),
        sorted(TeamPolicy.objects.values_list("id", "max_gpu_milli_per_workload")),
        sorted(Budget.objects.values_list("id", "amount", "stop_lifted_month")),
        sorted(QuotaRequest.objects.values_list("id", "state")),
        sorted(Reservation.objects.values_list("id", "state")),
        sorted(EndpointKey.objects.values_list("id", "revoked_at")),
        AuditEvent.objects.count(),
        sorted(Notice.objects.values_list("id", "read_at")),
        sorted(NotificationPreference.objects.values_list("user_id", "updated_at")),
    )


@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_outsider_gets_404_and_changes_nothing(
    cast: Cast, api: Client, method: str, template: str, body: dict[str, Any] | None
) -> None:
    path = template.format(**ids(cast))
    client = api(cast.outsider, ("write",))
    before = snapshot()
    response = getattr(client, method)(path, body, format="json")
    assert response.status_code == 404, (path, response.content)
    assert response.json() == {"code": "not_found", "message": "Not found.", "fields": {}}
    assert snapshot() == before


@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_owner_side_of_the_matrix_is_not_404(
    cast: Cast, api: Client, method: str, template: str, body: dict[str, Any] | None
) -> None:
    """The same requests from the lead reach the objects (so the 404s above mean something)."""
    path = template.format(**ids(cast))
    # Bookings above the approval threshold are decided by platform admins only.
    decider = cast.admin if path.startswith("/api/v1/reservations/") else cast.lead
    personal = "/tokens/" in path or "/notifications/" in path
    user = cast.owner if personal else decider
    if method == "put" and any(path.endswith(p) for p in ADMIN_WRITES):
        user = cast.admin
    if path.endswith("/budget/approve/"):
        budget_set(actor=cast.admin, team=cast.team, month=this_month(), amount=Decimal(1))
    client = api(user, ("write",))
    response = getattr(client, method)(path, body, format="json")
    assert response.status_code in (200, 201, 204, 409), (path, response.content)


@pytest.mark.parametrize(
    ("method", "template", "body"),
    [e for e in OBJECT_ENDPOINTS if e[0] != "get"] + COLLECTION_WRITES,
)
def test_read_token_cannot_write(
    cast: Cast, api: Client, method: str, template: str, body: dict[str, Any] | None
) -> None:
    path = template.format(**ids(cast))
    client = api(cast.lead, ("read",))
    before = snapshot()
    response = getattr(client, method)(path, body, format="json")
    assert response.status_code == 403
    assert response.json()["code"] == "permission_denied"
    assert "read scope only" in response.json()["message"]
    assert snapshot() == before


@pytest.mark.parametrize("path", ALL_PATHS + [t for _, t, _ in OBJECT_ENDPOINTS])
def test_no_credentials_get_401_with_the_error_shape(cast: Cast, path: str) -> None:
    response = APIClient().get(path.format(**ids(cast)))
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_matrix_covers_every_api_route() -> None:
    """A new endpoint must be added to the matrix above."""

    def routes(patterns: list[Any], prefix: str = "") -> list[str]:
        found: list[str] = []
        for p in patterns:
            if isinstance(p, URLResolver):
                found += routes(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                found.append(prefix + str(p.pattern))
        return found

    api_routes = {r for r in routes(get_resolver().url_patterns) if r.startswith("api/v1/")}
    normalised = {
        "/" + r.replace("<int:workload_id>", "{w}").replace("<slug:slug>", "{t}")
        for r in api_routes
    }
    covered = {
        t.split("?")[0]
        .replace("{workload}", "{w}")
        .replace("{notebook}", "{w}")
        .replace("{suspended}", "{w}")
        .replace("{sweep}", "{w}")
        .replace("{endpoint}", "{w}")
        .replace("{endpoint_key}", "<int:key_id>")
        .replace("{team}", "{t}")
        .replace("{quota_request}", "<int:request_id>")
        .replace("{reservation}", "<int:reservation_id>")
        for _, t, _ in OBJECT_ENDPOINTS
    } | set(ALL_PATHS)
    covered = {
        c.replace("/members/owner/", "/members/<str:username>/")
        .replace("{token}", "<int:token_id>")
        .replace("{notice}", "<int:notice_id>")
        .replace("/secrets/hf/", "/secrets/<str:name>/")
        .replace("/datasets/imagenet/", "/datasets/<str:name>/")
        for c in covered
    }
    covered |= {"/api/v1/gpu-classes/<str:name>/"}  # the catalogue is not team-owned
    assert normalised <= covered, normalised - covered
