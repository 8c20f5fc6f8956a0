"""Datasets over the API: members list them, leads register and remove them (audited),
requests name them, and another team's dataset is refused with nothing created."""

from __future__ import annotations

from typing import Any

import pytest

from apps.audit.models import AuditEvent
from apps.credentials.models import Secret
from apps.datasets.models import Dataset
from apps.workloads.models import Workload
from tests.api.conftest import Client
from tests.api.test_workloads_api import job
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def register(api: Client, who: Any, slug: str, **body: Any) -> Any:
    return api(who).post(f"/api/v1/teams/{slug}/datasets/", body, "json")


def test_lead_registers_a_claim_dataset_and_members_see_it(cast: Cast, api: Client) -> None:
    response = register(
        api, cast.lead, cast.team.slug, name="imagenet", kind="claim", claim="imagenet-pvc"
    )
    assert response.status_code == 201, response.content
    assert response.json() | {"created_at": None} == {
        "name": "imagenet",
        "kind": "claim",
        "claim": "imagenet-pvc",
        "uri": "",
        "secret": "",
        "mount_path": "/datasets/imagenet",
        "registered_by": "lead",
        "created_at": None,
    }
    listed = api(cast.teammate).get(f"/api/v1/teams/{cast.team.slug}/datasets/")
    assert [d["name"] for d in listed.json()] == ["imagenet"]
    assert AuditEvent.objects.filter(action="dataset.register").count() == 1


def test_object_dataset_takes_a_team_secret(cast: Cast, api: Client) -> None:
    Secret.objects.create(team=cast.team, name="s3", keys=["AWS_KEY"], k8s_name="gpp-s-s3")
    response = register(
        api, cast.lead, cast.team.slug, name="weights", kind="object", uri="s3://m/w/", secret="s3"
    )
    assert response.status_code == 201, response.content
    assert (response.json()["uri"], response.json()["secret"]) == ("s3://m/w/", "s3")
    missing = register(
        api, cast.lead, cast.team.slug, name="other", kind="object", uri="s3://m/o", secret="nope"
    )
    assert missing.status_code == 400
    assert "No team secret named “nope”" in missing.json()["fields"]["secret"][0]


def test_bad_values_are_field_messages(cast: Cast, api: Client) -> None:
    response = register(api, cast.lead, cast.team.slug, name="Bad Name", kind="object", uri="x")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"name", "uri"}
    register(api, cast.lead, cast.team.slug, name="imagenet", kind="claim", claim="c")
    again = register(api, cast.lead, cast.team.slug, name="imagenet", kind="claim", claim="c")
    assert again.status_code == 400
    assert "already has a dataset imagenet" in again.json()["fields"]["name"][0]


def test_member_may_not_register_or_remove(cast: Cast, api: Client) -> None:
    refused = register(api, cast.owner, cast.team.slug, name="imagenet", kind="claim", claim="c")
    assert refused.status_code == 403
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="c")
    gone = api(cast.owner).delete(f"/api/v1/teams/{cast.team.slug}/datasets/imagenet/")
    assert gone.status_code == 403
    assert Dataset.objects.count() == 1


def test_lead_removes_a_dataset(cast: Cast, api: Client) -> None:
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="c")
    gone = api(cast.lead).delete(f"/api/v1/teams/{cast.team.slug}/datasets/imagenet/")
    assert gone.status_code == 204
    assert not Dataset.objects.exists()
    assert AuditEvent.objects.filter(action="dataset.remove").count() == 1


def test_submit_names_a_dataset_and_another_teams_is_refused_with_nothing_created(
    cast: Cast, api: Client
) -> None:
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="imagenet-pvc")
    Dataset.objects.create(team=cast.other_team, name="private", kind="claim", claim="p")
    refused = api(cast.owner).post("/api/v1/workloads/", job(cast, datasets=["private"]), "json")
    assert refused.status_code == 400
    assert refused.json()["fields"]["datasets"] == [
        "No dataset named “private” in Vision; a request may use only its team's datasets "
        "(registered by its leads: imagenet)."
    ]
    assert not Workload.objects.exists()
    ok = api(cast.owner).post("/api/v1/workloads/", job(cast, datasets=["imagenet"]), "json")
    assert ok.status_code == 201, ok.content
    assert [d["name"] for d in ok.json()["datasets"]] == ["imagenet"]
    assert Workload.objects.get().datasets[0]["claim"] == "imagenet-pvc"
    # Clone names the same dataset again, by name.
    clone = api(cast.teammate).post(f"/api/v1/workloads/{ok.json()['id']}/clone/", {}, "json")
    assert clone.status_code == 201, clone.content
    assert clone.json()["datasets"] == ok.json()["datasets"]
