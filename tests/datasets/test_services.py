"""Registering and removing datasets: leads and admins only, audited, and what a workload
records reaches its manifests."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.audit.models import AuditEvent
from apps.credentials.models import Secret
from apps.datasets.models import Dataset
from apps.datasets.services import dataset_register, dataset_remove
from apps.orchestration import manifests as m
from apps.orchestration.selectors import team_spec, workload_spec
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_lead_and_admin_register_members_and_outsiders_may_not(cast: Cast) -> None:
    dataset_register(actor=cast.lead, team=cast.team, name="a", kind="claim", claim="a")
    dataset_register(actor=cast.admin, team=cast.team, name="b", kind="claim", claim="b")
    with pytest.raises(PermissionDenied):
        dataset_register(actor=cast.owner, team=cast.team, name="c", kind="claim", claim="c")
    with pytest.raises(PermissionDenied):
        dataset_register(actor=cast.outsider, team=cast.team, name="d", kind="claim", claim="d")
    assert sorted(Dataset.objects.values_list("name", flat=True)) == ["a", "b"]
    assert AuditEvent.objects.filter(action="dataset.register").count() == 2


def test_a_secret_must_be_a_team_secret_of_the_team(cast: Cast) -> None:
    Secret.objects.create(team=cast.other_team, name="s3", keys=["k"], k8s_name="gpp-s-other")
    Secret.objects.create(
        team=cast.team, owner=cast.lead, name="mine", keys=["k"], k8s_name="gpp-s-mine"
    )
    for name in ("s3", "mine"):
        with pytest.raises(ValidationError) as refused:
            dataset_register(
                actor=cast.lead, team=cast.team, name="w", kind="object", uri="s3://b", secret=name
            )
        assert "No team secret named" in refused.value.message_dict["secret"][0]
    with pytest.raises(ValidationError) as claim:
        dataset_register(
            actor=cast.lead, team=cast.team, name="w", kind="claim", claim="c", secret="s3"
        )
    assert set(claim.value.message_dict) == {"secret"}
    assert not Dataset.objects.exists()


def test_remove_is_for_leads_and_audited(cast: Cast) -> None:
    dataset = dataset_register(actor=cast.lead, team=cast.team, name="a", kind="claim", claim="a")
    with pytest.raises(PermissionDenied):
        dataset_remove(actor=cast.teammate, dataset=dataset)
    dataset_remove(actor=cast.lead, dataset=dataset)
    assert not Dataset.objects.exists()
    assert AuditEvent.objects.filter(action="dataset.remove").count() == 1


def test_recorded_datasets_and_the_team_volume_reach_the_specs(
    cast: Cast, settings: object
) -> None:
    workload = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        datasets=[
            {"name": "imagenet", "kind": "claim", "claim": "imagenet-pvc", "uri": ""},
            {
                "name": "w",
                "kind": "object",
                "uri": "s3://b/w",
                "secret": "gpp-s-1",
                "secret_keys": ["k"],
            },
        ],
    )
    spec = workload_spec(workload)
    assert spec.team_claim == m.team_claim_name() == "team-data"
    assert spec.datasets == (
        m.DatasetMount(name="imagenet", claim="imagenet-pvc"),
        m.DatasetMount(name="w", uri="s3://b/w", secret="gpp-s-1", secret_keys=("k",)),
    )
    team = team_spec(cast.team)
    assert (team.volume_size, team.volume_storage_class, team.storage_quota) == (
        "100Gi",
        "",
        "1Ti",
    )
