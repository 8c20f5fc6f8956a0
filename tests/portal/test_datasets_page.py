"""The Datasets page: leads register and remove, members see; the request form names datasets
and another team's is an inline error with nothing created."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.datasets.models import Dataset
from apps.workloads.models import Workload
from tests.portal.conftest import Portal
from tests.portal.test_request_forms import notebook_post

pytestmark = pytest.mark.django_db


def test_lead_registers_and_removes_a_dataset(portal: Portal) -> None:
    cast = portal.cast
    client = portal.client(cast.lead)
    path = f"/teams/{cast.team.slug}/datasets/"
    page = client.get(path)
    assert page.status_code == 200 and "Register a dataset" in page.content.decode()
    response = client.post(path, {"name": "imagenet", "kind": "claim", "claim": "imagenet-pvc"})
    assert response.status_code == 302
    dataset = Dataset.objects.get()
    assert (dataset.name, dataset.claim, dataset.registered_by) == (
        "imagenet",
        "imagenet-pvc",
        cast.lead,
    )
    html = portal.client(cast.teammate).get(path).content.decode()
    assert "/datasets/imagenet" in html and "Register a dataset" not in html
    bad = client.post(path, {"name": "Bad", "kind": "object", "uri": "nope"})
    assert bad.status_code == 400
    assert "cannot name a dataset" in bad.content.decode()
    gone = client.post(f"{path}remove/", {"name": "imagenet"})
    assert gone.status_code == 302
    assert not Dataset.objects.exists()
    assert AuditEvent.objects.filter(action__startswith="dataset.").count() == 2


def test_member_cannot_register_or_remove_and_outsider_gets_404(portal: Portal) -> None:
    cast = portal.cast
    path = f"/teams/{cast.team.slug}/datasets/"
    member = portal.client(cast.owner)
    refused = member.post(path, {"name": "imagenet", "kind": "claim", "claim": "c"}, follow=True)
    assert "Only the team&#x27;s leads and admins" in refused.content.decode()
    assert not Dataset.objects.exists()
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="c")
    member.post(f"{path}remove/", {"name": "imagenet"})
    assert Dataset.objects.count() == 1
    outsider = portal.client(cast.outsider)
    assert outsider.get(path).status_code == 404
    assert outsider.post(f"{path}remove/", {"name": "imagenet"}).status_code == 404
    assert Dataset.objects.count() == 1


def test_request_form_names_datasets_and_another_teams_is_an_inline_error(portal: Portal) -> None:
    cast = portal.cast
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="imagenet-pvc")
    Dataset.objects.create(team=cast.other_team, name="private", kind="claim", claim="p")
    client = portal.client(cast.owner)
    missing = client.post("/workloads/new/notebook/", notebook_post(portal, datasets="private"))
    assert missing.status_code == 400
    assert "No dataset named “private”" in missing.content.decode()
    assert not Workload.objects.exists()
    ok = client.post("/workloads/new/notebook/", notebook_post(portal, datasets="imagenet"))
    assert ok.status_code == 302, ok.content.decode()[-2000:]
    assert Workload.objects.get().datasets[0]["claim"] == "imagenet-pvc"
