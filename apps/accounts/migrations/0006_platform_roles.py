"""Platform roles: the operators', auditors' and billing's permission groups, and today's staff
users kept as platform admins (superusers), since the staff flag alone no longer grants
anything beyond the admin's model permissions.

The permissions are written down here as they are now (apps/accounts/roles.py says what each
group carries; a test keeps the two the same). Permissions are made after migrations by
Django, so this one makes those it needs first."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUPS = {
    "Platform operators": {
        "catalog.add_cluster",
        "catalog.change_cluster",
        "catalog.delete_cluster",
        "catalog.view_cluster",
        "catalog.add_nodemaintenance",
        "catalog.change_nodemaintenance",
        "catalog.delete_nodemaintenance",
        "catalog.view_nodemaintenance",
        "catalog.view_clusternode",
        "catalog.view_gpuclass",
        "telemetry.view_nodehealthreport",
    },
    "Platform billing": {
        "catalog.view_gpuclass",
        "catalog.change_gpuclass",
        "budgets.view_budget",
        "budgets.view_budgetspend",
        "telemetry.view_workloadusage",
        "telemetry.view_usageday",
        "accounts.view_team",
    },
}
AUDITORS = "Platform auditors"
AUDITOR_UNSEEN = {"sessions.view_session", "accounts.view_usersession", "accounts.view_oidcidentity"}


def _labelled(permission: Any) -> str:
    return f"{permission.content_type.app_label}.{permission.codename}"


def make_groups(apps: Any, schema_editor: Any) -> None:
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    every = {_labelled(p): p for p in Permission.objects.select_related("content_type")}
    wanted = {
        **GROUPS,
        AUDITORS: {
            p for p in every if p.split(".", 1)[1].startswith("view_") and p not in AUDITOR_UNSEEN
        },
    }
    for name, labels in wanted.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set([every[label] for label in sorted(labels) if label in every])


def drop_groups(apps: Any, schema_editor: Any) -> None:
    apps.get_model("auth", "Group").objects.filter(name__in=[*GROUPS, AUDITORS]).delete()


def staff_stay_admins(apps: Any, schema_editor: Any) -> None:
    apps.get_model("accounts", "User").objects.filter(is_staff=True, is_superuser=False).update(
        is_superuser=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_user_idp_refresh_by"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("sessions", "0001_initial"),
        ("audit", "0001_initial"),
        ("budgets", "0001_budget_and_spend"),
        ("catalog", "0007_node_dra_devices"),
        ("credentials", "0003_endpoint_keys_to_serving"),
        ("datasets", "0001_initial"),
        ("notifications", "0002_digest"),
        ("orchestration", "0004_live_metrics"),
        ("policies", "0001_team_policy"),
        ("quotas", "0002_quota_requests_and_grants"),
        ("reservations", "0001_reservations"),
        ("serving", "0002_endpoint_keys_from_credentials"),
        ("telemetry", "0003_usage_jupyter_activity"),
        ("workloads", "0015_workload_checkpoint"),
    ]

    operations = [
        migrations.RunPython(make_groups, drop_groups),
        # Not undone: who was a superuser before cannot be told apart afterwards.
        migrations.RunPython(staff_stay_admins, migrations.RunPython.noop),
    ]
