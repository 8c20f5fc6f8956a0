"""Inference endpoints through the API and the portal: the same field messages at every door,
keys shown once and hashed, and the ingress's auth check: no call without a valid key (or a
team member's session)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client as DjangoClient

from apps.serving.models import EndpointKey
from apps.workloads import core
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.credentials.fakes import _fake_cluster  # noqa: F401
from tests.factories import ImageFactory
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_cluster")]


def body(cast: Cast, **endpoint: Any) -> dict[str, Any]:
    ImageFactory(name="vLLM", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving")
    return {
        "kind": "inference",
        "name": "llm",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": "vLLM",
        "gpu_milli": endpoint.pop("gpu_milli", 1000),
        "endpoint": {"model_path": "/team/models/llama", "max_replicas": 2, **endpoint},
    }


def test_a_lead_deploys_an_endpoint_in_the_production_class(cast: Cast, api: Client) -> None:
    response = api(cast.lead).post("/api/v1/workloads/", body(cast, min_replicas=1), "json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert (created["kind"], created["priority_class"], created["replicas"]) == (
        "inference",
        "production",
        1,
    )
    endpoint = created["params"]["endpoint"]
    assert endpoint["model_path"] == "/team/models/llama"
    assert (endpoint["target_replicas"], endpoint["revision"]) == (1, 1)


@pytest.mark.parametrize(
    ("endpoint", "field", "message"),
    [
        ({"port": 80}, "port", "The port is a whole number from 1024 to 65535."),
        ({"port": "http"}, "port", "The port is a whole number from 1024 to 65535."),
        (
            {"min_replicas": 3, "max_replicas": 2},
            "min_replicas",
            "The minimum (3) is above the maximum (2) replicas.",
        ),
        ({"model_path": "/etc/shadow"}, "model_path", "The model must be on the team's volumes"),
        ({"model_path": "/team/../etc"}, "model_path", "without . or .."),
        ({"gpu_milli": 500}, "gpu_milli", "gives whole GPUs only"),
        ({"health_path": "no slash"}, "health_path", "The health path starts with /"),
    ],
)
def test_bad_endpoint_input_is_refused_with_a_field_message(
    cast: Cast, api: Client, endpoint: dict[str, Any], field: str, message: str
) -> None:
    response = api(cast.lead).post("/api/v1/workloads/", body(cast, **endpoint), "json")
    assert response.status_code == 400, response.json()
    assert message in response.json()["fields"][field][0]
    assert not Workload.objects.filter(kind=core.KIND_INFERENCE).exists()


def test_a_member_is_told_endpoints_are_for_leads(cast: Cast, api: Client) -> None:
    response = api(cast.owner).post("/api/v1/workloads/", body(cast), "json")
    assert response.status_code == 400
    assert "production class" in response.json()["fields"]["priority_class"][0]


def _endpoint(cast: Cast, api: Client) -> int:
    response = api(cast.lead).post("/api/v1/workloads/", body(cast), "json")
    assert response.status_code == 201, response.json()
    pk = int(response.json()["id"])
    Workload.objects.filter(pk=pk).update(state=core.RUNNING)
    return pk


def test_keys_are_shown_once_stored_hashed_and_open_only_their_endpoint(
    cast: Cast, api: Client
) -> None:
    pk = _endpoint(cast, api)
    other = _endpoint(cast, api)
    client = api(cast.lead)
    created = client.post(f"/api/v1/workloads/{pk}/keys/", {"name": "chatbot"}, "json")
    assert created.status_code == 201, created.json()
    key = created.json()["key"]
    assert key.startswith("gpe_")
    stored = EndpointKey.objects.get(pk=created.json()["id"])
    assert key not in (stored.digest, stored.lookup) and len(stored.digest) == 64
    listed = client.get(f"/api/v1/workloads/{pk}/keys/").json()
    assert [k["name"] for k in listed] == ["chatbot"] and "key" not in listed[0]
    other_key = client.post(f"/api/v1/workloads/{other}/keys/", {"name": "x"}, "json").json()

    ingress = DjangoClient()
    auth = f"/endpoints/auth/{pk}/"
    assert ingress.get(auth).status_code == 401
    assert ingress.get(auth, HTTP_AUTHORIZATION="Bearer gpe_0000_wrong").status_code == 401
    assert ingress.get(auth, HTTP_AUTHORIZATION=f"Bearer {other_key['key']}").status_code == 401
    assert ingress.get(auth, HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    assert ingress.get(auth, HTTP_X_API_KEY=key).status_code == 200
    stored.refresh_from_db()
    assert stored.last_used_at is not None

    assert client.delete(f"/api/v1/workloads/{pk}/keys/{stored.pk}/").status_code == 204
    assert ingress.get(auth, HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
    # A key for an endpoint id that does not exist opens nothing, and is answered as a wrong
    # key is (the same status and body: nobody learns which endpoints exist).
    unknown = ingress.get("/endpoints/auth/999999/", HTTP_AUTHORIZATION=f"Bearer {key}")
    wrong = ingress.get(auth, HTTP_AUTHORIZATION="Bearer gpe_0000_wrong")
    assert (
        (unknown.status_code, unknown.content)
        == (wrong.status_code, wrong.content)
        == (
            401,
            wrong.content,
        )
    )


def test_signed_in_team_members_may_call_and_outsiders_may_not(cast: Cast, api: Client) -> None:
    pk = _endpoint(cast, api)
    member = DjangoClient()
    member.force_login(cast.teammate)
    assert member.get(f"/endpoints/auth/{pk}/").status_code == 200
    outsider = DjangoClient()
    outsider.force_login(cast.outsider)
    assert outsider.get(f"/endpoints/auth/{pk}/").status_code == 403


def test_a_call_to_an_endpoint_scaled_to_zero_wakes_it(cast: Cast, api: Client) -> None:
    pk = _endpoint(cast, api)
    Workload.objects.filter(pk=pk).update(state=core.SUSPENDED)
    member = DjangoClient()
    member.force_login(cast.teammate)
    response = member.get(f"/endpoints/auth/{pk}/")
    assert response.status_code == 200 and response["X-Gpupaas-Endpoint"] == "waking"
    assert Workload.objects.get(pk=pk).state == core.QUEUED


def test_scaling_outside_the_bounds_and_the_overview(cast: Cast, api: Client) -> None:
    pk = _endpoint(cast, api)
    client = api(cast.lead)
    refused = client.post(f"/api/v1/workloads/{pk}/scale/", {"replicas": 3}, "json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["replicas"] == ["This endpoint runs between 1 and 2 replicas."]
    assert client.post(f"/api/v1/workloads/{pk}/scale/", {"replicas": 2}, "json").status_code == 200
    overview = client.get(f"/api/v1/workloads/{pk}/endpoint/").json()
    assert (overview["replicas"], overview["target"], overview["max_replicas"]) == (1, 2, 2)
    assert overview["settings"]["model_path"] == "/team/models/llama"
    members = api(cast.owner).post(f"/api/v1/workloads/{pk}/scale/", {"replicas": 1}, "json")
    assert members.status_code == 403


def test_the_portal_form_shows_the_same_field_messages(cast: Cast) -> None:
    ImageFactory(name="vLLM", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving")
    client = DjangoClient()
    client.force_login(cast.lead)
    page = client.get("/workloads/new/inference/")
    assert page.status_code == 200 and b"Health path" in page.content
    image = ImageFactory(name="vLLM")
    response = client.post(
        "/workloads/new/inference/",
        {
            "action": "submit",
            "name": "llm",
            "team": cast.team.pk,
            "gpu_class": cast.gpu_class.pk,
            "gpu_milli": 1000,
            "priority_class": "production",
            "image": image.pk,
            "model_path": "/etc/passwd",
            "port": 80,
            "health_path": "/health",
            "min_replicas": 3,
            "max_replicas": 2,
            "scale_metric": "rps",
        },
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "The port is a whole number from 1024 to 65535." in text
    assert "The minimum (3) is above the maximum (2) replicas." in text
    assert "The model must be on the team&#x27;s volumes" in text


def test_clone_fills_in_the_endpoint_form(cast: Cast, api: Client) -> None:
    pk = _endpoint(cast, api)
    client = DjangoClient()
    client.force_login(cast.lead)
    page = client.get(f"/workloads/new/inference/?clone={pk}")
    assert page.status_code == 200
    form = page.context["form"]
    assert form.initial["model_path"] == "/team/models/llama"
    assert form.initial["max_replicas"] == 2
