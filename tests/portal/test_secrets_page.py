"""The Secrets page: values go in as a password field and never come back; requests refer to
secrets by name from the request form."""

from __future__ import annotations

import pytest

from apps.credentials.models import Secret
from apps.workloads.models import Workload
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.portal.conftest import Portal
from tests.portal.test_request_forms import notebook_post

pytestmark = pytest.mark.django_db
VALUE = "wandb-portal-s3cret-value"


def test_lead_saves_a_team_secret_and_the_value_is_never_shown(
    portal: Portal, fake_cluster: FakeCluster
) -> None:
    cast = portal.cast
    client = portal.client(cast.lead)
    page = client.get(f"/teams/{cast.team.slug}/secrets/")
    assert page.status_code == 200
    assert 'type="password"' in page.content.decode()
    response = client.post(
        f"/teams/{cast.team.slug}/secrets/", {"name": "wandb", "key": "key", "value": VALUE}
    )
    assert response.status_code == 302
    secret = Secret.objects.get()
    assert (secret.name, secret.scope, secret.keys) == ("wandb", "team", ["key"])
    assert fake_cluster.secrets[(cast.team.namespace, secret.k8s_name)] == {"key": VALUE}
    for who in (cast.lead, cast.teammate):
        html = portal.client(who).get(f"/teams/{cast.team.slug}/secrets/").content.decode()
        assert "wandb" in html and VALUE not in html


def test_member_cannot_save_a_team_secret_but_a_personal_one_only_they_see(
    portal: Portal, fake_cluster: FakeCluster
) -> None:
    cast = portal.cast
    client = portal.client(cast.owner)
    path = f"/teams/{cast.team.slug}/secrets/"
    refused = client.post(path, {"name": "hf", "key": "token", "value": VALUE})
    assert refused.status_code == 400
    assert "Only the team&#x27;s leads" in refused.content.decode()
    assert not Secret.objects.exists()
    client.post(path, {"name": "hf", "key": "token", "value": VALUE, "personal": "on"})
    assert Secret.objects.get().owner == cast.owner
    assert "hf" not in portal.client(cast.teammate).get(path).content.decode().split("<h2")[1]
    # a teammate cannot delete it (404: not theirs to see)
    gone = portal.client(cast.teammate).post(f"{path}delete/", {"name": "hf"})
    assert gone.status_code == 404 and Secret.objects.exists()
    client.post(f"{path}rotate/", {"name": "hf", "key": "token", "value": "new"})
    assert fake_cluster.secrets[(cast.team.namespace, Secret.objects.get().k8s_name)] == {
        "token": "new"
    }
    client.post(f"{path}delete/", {"name": "hf", "scope": "personal"})
    assert not Secret.objects.exists()


def test_outsider_gets_404(portal: Portal, fake_cluster: FakeCluster) -> None:
    client = portal.client(portal.cast.outsider)
    path = f"/teams/{portal.cast.team.slug}/secrets/"
    assert client.get(path).status_code == 404
    assert (
        client.post(path, {"name": "x", "key": "k", "value": "v", "personal": "on"}).status_code
        == 404
    )
    assert not Secret.objects.exists()


def test_request_form_refers_to_secrets_and_a_missing_one_is_an_inline_error(
    portal: Portal, fake_cluster: FakeCluster
) -> None:
    cast = portal.cast
    portal.client(cast.lead).post(
        f"/teams/{cast.team.slug}/secrets/", {"name": "hf", "key": "token", "value": VALUE}
    )
    client = portal.client(cast.owner)
    missing = client.post("/workloads/new/notebook/", notebook_post(portal, secrets="nope:X"))
    assert missing.status_code == 400
    assert "No secret named “nope”" in missing.content.decode()
    assert not Workload.objects.exists()
    ok = client.post("/workloads/new/notebook/", notebook_post(portal, secrets="hf:HF_TOKEN"))
    assert ok.status_code == 302, ok.content.decode()[-2000:]
    (ref,) = Workload.objects.get().secrets
    assert (ref["name"], ref["env"], ref["key"]) == ("hf", "HF_TOKEN", "token")
