"""Secrets through the services: who may write them, and that values never reach the DB."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection

from apps.audit.models import AuditEvent
from apps.credentials.models import Secret
from apps.orchestration import credentials
from apps.orchestration.credentials import secret_create, secret_delete, secret_rotate
from apps.orchestration.errors import ClusterUnreachable
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
VALUE = "hf_pl41ntext-v4lue-n3ver-st0red"


def _everything_in_the_database() -> str:
    """Every row of the secrets and audit tables, as text."""
    with connection.cursor() as cursor:
        texts = []
        for table in (Secret._meta.db_table, AuditEvent._meta.db_table):
            cursor.execute(f"SELECT * FROM {table}")  # noqa: S608 - our own table names
            texts.append(json.dumps(cursor.fetchall(), default=str))
    return "\n".join(texts)


def test_lead_creates_a_team_secret_in_the_namespace_and_the_value_stays_out_of_the_db(
    cast: Cast, fake_cluster: FakeCluster
) -> None:
    secret = secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": VALUE})
    assert (secret.scope, secret.keys, secret.owner_id) == ("team", ["token"], None)
    assert secret.k8s_name.startswith("gpp-s-")
    assert fake_cluster.secrets == {(cast.team.namespace, secret.k8s_name): {"token": VALUE}}
    secret_rotate(actor=cast.lead, secret=secret, data={"token": VALUE + "2", "user": "me"})
    assert fake_cluster.secrets[(cast.team.namespace, secret.k8s_name)]["token"] == VALUE + "2"
    assert Secret.objects.get().keys == ["token", "user"]
    dump = _everything_in_the_database()
    assert VALUE not in dump and "secret.create" in dump and "secret.rotate" in dump


def test_member_may_not_create_a_team_secret_but_a_personal_one(
    cast: Cast, fake_cluster: FakeCluster
) -> None:
    with pytest.raises(PermissionDenied):
        secret_create(actor=cast.owner, team=cast.team, name="hf", data={"token": VALUE})
    mine = secret_create(
        actor=cast.owner, team=cast.team, name="hf", data={"token": VALUE}, personal=True
    )
    assert (mine.scope, mine.owner_id) == ("personal", cast.owner.pk)
    # the teammate may neither rotate nor delete it, a lead neither
    for who in (cast.teammate, cast.lead):
        with pytest.raises(PermissionDenied):
            secret_rotate(actor=who, secret=mine, data={"token": "x"})
        with pytest.raises(PermissionDenied):
            secret_delete(actor=who, secret=mine)
    with pytest.raises(PermissionDenied):
        secret_create(actor=cast.outsider, team=cast.team, name="x", data={"t": "v"}, personal=True)


def test_bad_or_taken_names_are_refused_by_field(cast: Cast, fake_cluster: FakeCluster) -> None:
    with pytest.raises(ValidationError) as bad:
        secret_create(actor=cast.lead, team=cast.team, name="Bad_Name", data={})
    assert set(bad.value.message_dict) == {"name", "value"}
    secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": "a"})
    with pytest.raises(ValidationError) as taken:
        secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": "b"})
    assert "already has a secret hf" in taken.value.message_dict["name"][0]
    # a personal secret may share the team secret's name
    secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": "c"}, personal=True)
    assert Secret.objects.count() == 2


def test_unreachable_cluster_refuses_and_records_nothing(
    cast: Cast, fake_cluster: FakeCluster
) -> None:
    fake_cluster.down = True
    with pytest.raises(ClusterUnreachable):
        secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": VALUE})
    assert not Secret.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="secret.").exists()


def test_delete_forgets_the_secret_and_removes_it_from_the_cluster(
    cast: Cast, fake_cluster: FakeCluster, django_capture_on_commit_callbacks: object
) -> None:
    secret = secret_create(actor=cast.lead, team=cast.team, name="hf", data={"token": VALUE})
    with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
        secret_delete(actor=cast.lead, secret=secret)
    queued = (cast.team.namespace, secret.k8s_name)
    assert fake_cluster.queued == [("orchestration.credential_remove", queued)]
    assert not Secret.objects.exists()
    assert credentials.credential_remove(namespace=queued[0], k8s_name=queued[1]) == 1
    assert fake_cluster.secrets == {}
