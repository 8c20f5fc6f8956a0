"""Secrets over the API: created and listed without values, used by name in requests, kept
by Clone, refused to teammates and outsiders."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.credentials.models import Secret
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.api.test_workloads_api import job
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
VALUE = "hf_v3ry-s3cret-api-value"


def create(api: Client, who: Any, slug: str, **body: Any) -> Any:
    return api(who).post(f"/api/v1/teams/{slug}/secrets/", body, "json")


def test_lead_creates_a_team_secret_and_nobody_is_shown_the_value(
    cast: Cast, api: Client, fake_cluster: FakeCluster
) -> None:
    response = create(api, cast.lead, cast.team.slug, name="hf", data={"token": VALUE})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["scope"], body["owner"], body["keys"]) == (
        "hf",
        "team",
        None,
        ["token"],
    )
    assert body["created_by"] == "lead"
    listed = api(cast.teammate).get(f"/api/v1/teams/{cast.team.slug}/secrets/")
    assert [s["name"] for s in listed.json()] == ["hf"]
    assert VALUE not in response.content.decode() + listed.content.decode()
    secret = Secret.objects.get()
    row = json.dumps(list(Secret.objects.values().get().values()), default=str)
    events = json.dumps(list(AuditEvent.objects.values_list("details", flat=True)))
    assert VALUE not in row + events
    assert fake_cluster.secrets[(cast.team.namespace, secret.k8s_name)] == {"token": VALUE}


def test_member_gets_403_for_a_team_secret_and_makes_a_personal_one(
    cast: Cast, api: Client, fake_cluster: FakeCluster
) -> None:
    refused = create(api, cast.owner, cast.team.slug, name="hf", data={"token": VALUE})
    assert refused.status_code == 403
    mine = create(api, cast.owner, cast.team.slug, name="hf", personal=True, data={"t": VALUE})
    assert mine.status_code == 201
    assert (mine.json()["scope"], mine.json()["owner"]) == ("personal", "owner")
    # the teammate does not see it, cannot rotate or delete it
    assert api(cast.teammate).get(f"/api/v1/teams/{cast.team.slug}/secrets/").json() == []
    path = f"/api/v1/teams/{cast.team.slug}/secrets/hf/"
    assert api(cast.teammate).put(path, {"data": {"t": "x"}}, "json").status_code == 404
    assert api(cast.teammate).delete(path).status_code == 404
    rotated = api(cast.owner).put(path, {"data": {"t": "new", "u": "x"}}, "json")
    assert rotated.status_code == 200 and rotated.json()["keys"] == ["t", "u"]
    assert api(cast.owner).delete(path).status_code == 204
    assert not Secret.objects.exists()


def test_bad_name_is_a_field_message(cast: Cast, api: Client, fake_cluster: FakeCluster) -> None:
    response = create(api, cast.lead, cast.team.slug, name="Not Valid", data={"k": "v"})
    assert response.status_code == 400
    assert "cannot name a secret" in response.json()["fields"]["name"][0]


def test_outsider_gets_404_and_cannot_create_in_another_team(
    cast: Cast, api: Client, fake_cluster: FakeCluster
) -> None:
    create(api, cast.lead, cast.team.slug, name="hf", data={"token": VALUE})
    path = f"/api/v1/teams/{cast.team.slug}/secrets/"
    assert api(cast.outsider).get(path).status_code == 404
    response = create(api, cast.outsider, cast.team.slug, name="x", data={"k": "v"}, personal=True)
    assert response.status_code == 404
    assert Secret.objects.count() == 1


def test_submit_refers_to_a_secret_and_a_missing_one_is_refused_with_nothing_created(
    cast: Cast, api: Client, fake_cluster: FakeCluster
) -> None:
    create(api, cast.lead, cast.team.slug, name="hf", data={"token": VALUE})
    missing = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, secrets=[{"name": "nope", "env": "X"}]), "json"
    )
    assert missing.status_code == 400
    assert "No secret named “nope”" in missing.json()["fields"]["secrets"][0]
    assert not Workload.objects.exists()
    ok = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, secrets=[{"name": "hf", "env": "HF_TOKEN"}]), "json"
    )
    assert ok.status_code == 201, ok.content
    secret = Secret.objects.get()
    assert ok.json()["secrets"] == [
        {
            "name": "hf",
            "env": "HF_TOKEN",
            "key": "token",
            "scope": "team",
            "owner": None,
            "k8s_name": secret.k8s_name,
        }
    ]
    # Clone keeps the reference, for a teammate too (a team secret)
    clone = api(cast.teammate).post(f"/api/v1/workloads/{ok.json()['id']}/clone/", {}, "json")
    assert clone.status_code == 201, clone.content
    assert clone.json()["secrets"] == ok.json()["secrets"]


def test_teammate_cannot_clone_a_request_using_a_personal_secret(
    cast: Cast, api: Client, fake_cluster: FakeCluster
) -> None:
    create(api, cast.owner, cast.team.slug, name="mine", personal=True, data={"token": VALUE})
    ok = api(cast.owner).post(
        "/api/v1/workloads/", job(cast, secrets=[{"name": "mine", "env": "T"}]), "json"
    )
    assert ok.status_code == 201, ok.content
    path = f"/api/v1/workloads/{ok.json()['id']}/clone/"
    refused = api(cast.teammate).post(path, {}, "json")
    assert refused.status_code == 400
    assert "someone else's personal secret" in refused.json()["fields"]["secrets"][0]
    assert Workload.objects.count() == 1
    # by name, the teammate does not find it either
    by_name = api(cast.teammate).post(
        "/api/v1/workloads/", job(cast, secrets=[{"name": "mine", "env": "T"}]), "json"
    )
    assert by_name.status_code == 400
    # the owner's own clone keeps it
    assert api(cast.owner).post(path, {}, "json").status_code == 201
