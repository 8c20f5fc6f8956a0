"""The migration that brings in platform roles keeps today's staff users as platform admins and
makes the other roles' permission groups."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("accounts", "0005_user_idp_refresh_by")]
AFTER = [("accounts", "0006_platform_roles")]


@pytest.mark.django_db(transaction=True)
def test_staff_users_stay_platform_admins_and_the_role_groups_are_made() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    User = old.get_model("accounts", "User")
    staff = User.objects.create(username="staff", is_staff=True, is_superuser=False)
    root = User.objects.create(username="root", is_staff=True, is_superuser=True)
    member = User.objects.create(username="member")

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps
    users = new.get_model("accounts", "User").objects
    assert users.get(pk=staff.pk).is_superuser is True
    assert users.get(pk=root.pk).is_superuser is True
    assert users.get(pk=member.pk).is_superuser is False
    groups = new.get_model("auth", "Group").objects
    operators = groups.get(name="Platform operators")
    labels = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in operators.permissions.select_related("content_type")
    }
    assert "catalog.add_nodemaintenance" in labels and "workloads.view_workload" not in labels
    auditors = groups.get(name="Platform auditors").permissions
    assert auditors.filter(codename="view_workload").exists()
    assert not auditors.exclude(codename__startswith="view_").exists()
    assert groups.get(name="Platform billing").permissions.filter(codename="change_gpuclass")
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
