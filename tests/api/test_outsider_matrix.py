"""Every endpoint × method with another team's ids: the outsider gets 404 and changes nothing.
Also: a read-scoped token cannot write anywhere, and nobody gets in without credentials."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken, Membership
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from apps.credentials.models import EndpointKey, Secret
from apps.datasets.models import Dataset
from apps.workloads import core
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.credentials.fakes import _fake_cluster  # noqa: F401
from tests.factories import ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_cluster")]

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
    ("get", "/api/v1/tokens/{token}/", None),
    ("delete", "/api/v1/tokens/{token}/", None),
]

COLLECTION_WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("post", "/api/v1/workloads/", {"kind": "training", "name": "x"}),
    ("post", "/api/v1/workloads/validate/", {"kind": "training", "name": "x"}),
    ("post", "/api/v1/tokens/", {"name": "x", "scopes": ["read"]}),
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
]


def ids(cast: Cast) -> dict[str, Any]:
    """Objects of the cast's team (Vision), which the outsider (NLP) must not reach."""
    common = {"team": cast.team, "owner": cast.owner, "gpu_class": cast.gpu_class}
    token, _ = api_token_create(actor=cast.owner, name="owner's", scopes=["read"], expires_at=None)
    Secret.objects.create(team=cast.team, name="hf", keys=["token"], k8s_name="gpp-s-matrix")
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="imagenet-pvc")
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
    }


def snapshot() -> tuple[Any, ...]:
    return (
        sorted(Workload.objects.values_list("id", "state")),
        sorted(Membership.objects.values_list("user__username", "team__slug", "role")),
        sorted(ApiToken.objects.values_list("id", "revoked_at")),
        sorted(Secret.objects.values_list("id", "keys", "updated_at")),
        sorted(Dataset.objects.values_list("id", "name")),
        sorted(EndpointKey.objects.values_list("id", "revoked_at")),
        AuditEvent.objects.count(),
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
    client = api(cast.owner if "/tokens/" in path else cast.lead, ("write",))
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
        for _, t, _ in OBJECT_ENDPOINTS
    } | set(ALL_PATHS)
    covered = {
        c.replace("/members/owner/", "/members/<str:username>/")
        .replace("{token}", "<int:token_id>")
        .replace("/secrets/hf/", "/secrets/<str:name>/")
        .replace("/datasets/imagenet/", "/datasets/<str:name>/")
        for c in covered
    }
    covered |= {"/api/v1/gpu-classes/<str:name>/"}  # the catalogue is not team-owned
    assert normalised <= covered, normalised - covered
