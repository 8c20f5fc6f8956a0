from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.test import Client

from apps.accounts.models import Membership, Team, User
from apps.audit.models import AuditEvent
from apps.catalog.models import GpuClass, Image
from apps.quotas.models import TeamQuota

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "model",
    [m for m in admin.site._registry if m._meta.app_label != "auth"],
    ids=lambda m: m._meta.label,
)
def test_every_admin_changelist_renders(admin_client: Client, model: type) -> None:
    call_command("seed_demo", verbosity=0)
    url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
    assert admin_client.get(url).status_code == 200
    obj = model._default_manager.first()
    if obj is not None:
        assert admin_client.get(f"{url}{obj.pk}/change/").status_code == 200


def test_seed_demo_is_idempotent() -> None:
    call_command("seed_demo", verbosity=0)
    counts = (
        Team.objects.count(),
        User.objects.count(),
        Membership.objects.count(),
        GpuClass.objects.count(),
        Image.objects.count(),
        TeamQuota.objects.count(),
        AuditEvent.objects.count(),
    )
    call_command("seed_demo", verbosity=0)
    again = (
        Team.objects.count(),
        User.objects.count(),
        Membership.objects.count(),
        GpuClass.objects.count(),
        Image.objects.count(),
        TeamQuota.objects.count(),
        AuditEvent.objects.count(),
    )
    assert counts == again
    assert counts[:2] == (2, 5)
    assert set(GpuClass.objects.values_list("sharing_mode", flat=True)) == {
        "whole",
        "mig",
        "timeslice",
        "hami",
    }
    bob = User.objects.get(username="bob")
    assert sorted(bob.memberships.values_list("team__slug", flat=True)) == ["nlp", "vision"]
    for gpu_class in GpuClass.objects.all():
        gpu_class.full_clean()


def test_audit_trail_is_read_only_in_admin(admin_client: Client) -> None:
    call_command("seed_demo", verbosity=0)
    event = AuditEvent.objects.first()
    assert event is not None
    assert admin_client.get("/admin/audit/auditevent/add/").status_code == 403
    assert (
        admin_client.post(
            f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}
        ).status_code
        == 403
    )
    assert AuditEvent.objects.filter(pk=event.pk).exists()
