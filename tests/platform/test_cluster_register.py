"""`manage.py cluster_register`: how the Helm chart (in-cluster) and docker-compose (a
mounted kubeconfig) register their cluster without clicking."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.audit.models import AuditEvent
from apps.catalog.models import Cluster

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("cluster_register", *args, stdout=out)
    return out.getvalue().strip()


def test_in_cluster_registration_is_idempotent_and_audited() -> None:
    assert _run("local", "--in-cluster") == "cluster local: registered"
    cluster = Cluster.objects.get(name="local")
    assert cluster.connection == Cluster.Connection.IN_CLUSTER
    assert cluster.kubeconfig_path == "" and cluster.role == Cluster.Role.HUB
    entries = AuditEvent.objects.count()
    assert _run("local", "--in-cluster") == "cluster local: unchanged"
    assert AuditEvent.objects.count() == entries
    assert _run("local", "--kubeconfig", "/etc/gpupaas/kubeconfig", "--role", "burst") == (
        "cluster local: updated"
    )
    cluster.refresh_from_db()
    assert cluster.connection == Cluster.Connection.KUBECONFIG
    assert (cluster.kubeconfig_path, cluster.role) == ("/etc/gpupaas/kubeconfig", "burst")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("bad name!", "--in-cluster"), "slug"),
        (
            ("local", "--in-cluster", "--context", "admin"),
            "in-cluster connection uses no kubeconfig",
        ),
    ],
)
def test_bad_registrations_are_refused_clearly(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run(*args)
    assert not Cluster.objects.exists()
