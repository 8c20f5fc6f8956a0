"""Platform roles: the one rule (apps/accounts/roles.py), the selector every door asks, the
roles' permission groups in the admin, and the roles from the identity provider's groups at
sign-in, at the group re-check and when the provider no longer confirms them."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.accounts import core
from apps.accounts.models import OidcIdentity, User
from apps.accounts.oidc import role_groups_setting
from apps.accounts.roles import (
    GRANTS,
    ROLE_GROUPS,
    Act,
    Role,
    admin_permissions,
    may,
    refusal,
    roles_from,
)
from apps.accounts.selectors import (
    forget_role_copy,
    platform_may,
    platform_roles,
    users_who_may,
)
from apps.accounts.services import user_groups_confirm, user_groups_lapse, user_sync_oidc
from apps.audit.models import AuditEvent
from tests.factories import UserFactory

# --- the rule -----------------------------------------------------------------------------------

AFTER_ROLES = [("accounts", "0006_platform_roles")]
WRITES = {Act.ACT_FOR_TEAMS, Act.GOVERN_TEAMS, Act.MANAGE_CAPACITY, Act.MANAGE_BILLING}


def test_platform_admin_may_do_everything() -> None:
    assert all(may({Role.ADMIN}, act) for act in Act)


def test_auditor_reads_everything_and_changes_nothing() -> None:
    assert {a for a in Act if may({Role.AUDITOR}, a)} == {
        Act.SEE_TEAMS,
        Act.SEE_SPEND,
        Act.SEE_CAPACITY,
    }
    assert not any(may({Role.AUDITOR}, act) for act in WRITES)


def test_operator_manages_capacity_only() -> None:
    assert {a for a in Act if may({Role.OPERATOR}, a)} == {Act.SEE_CAPACITY, Act.MANAGE_CAPACITY}


def test_billing_manages_budgets_and_prices_only() -> None:
    assert {a for a in Act if may({Role.BILLING}, a)} == {Act.SEE_SPEND, Act.MANAGE_BILLING}


def test_several_roles_grant_the_union_and_no_role_grants_nothing() -> None:
    both = {a for a in Act if may({Role.OPERATOR, Role.BILLING}, a)}
    assert both == GRANTS[Role.OPERATOR] | GRANTS[Role.BILLING]
    assert not any(may(set(), act) for act in Act)


def test_roles_come_from_the_superuser_flag_and_the_role_groups_only() -> None:
    assert roles_from(superuser=True, group_names=[]) == {Role.ADMIN}
    assert roles_from(superuser=False, group_names=["Platform auditors", "ML team"]) == {
        Role.AUDITOR
    }
    assert roles_from(superuser=False, group_names=["auditors"]) == frozenset()


def test_a_refusal_names_who_may() -> None:
    assert refusal(Act.MANAGE_BILLING) == (
        "Only a platform admin or billing may set budgets and prices, run chargeback."
    )


# --- the selector -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_staff_flag_alone_is_no_platform_role() -> None:
    staff = UserFactory(username="staff-only", is_staff=True, is_superuser=False)
    assert platform_roles(staff) == frozenset()
    assert not any(platform_may(staff, act) for act in Act)


@pytest.mark.django_db
def test_factory_staff_still_means_platform_admin() -> None:
    assert platform_roles(UserFactory(username="old-admin", is_staff=True)) == {Role.ADMIN}


@pytest.mark.django_db
def test_roles_are_read_from_group_membership_once_per_user_object(
    django_assert_num_queries: Any,
) -> None:
    user = UserFactory(username="ada", roles=[Role.AUDITOR, Role.BILLING])
    fresh = User.objects.get(pk=user.pk)
    with django_assert_num_queries(1):
        assert platform_roles(fresh) == {Role.AUDITOR, Role.BILLING}
        assert platform_may(fresh, Act.SEE_TEAMS)
        assert platform_may(fresh, Act.MANAGE_BILLING)
    fresh.groups.clear()
    forget_role_copy(fresh)
    assert platform_roles(fresh) == frozenset()


@pytest.mark.django_db
def test_an_inactive_user_holds_no_role() -> None:
    user = UserFactory(username="gone", roles=[Role.ADMIN], is_active=False)
    assert platform_roles(user) == frozenset()


@pytest.mark.django_db
def test_budget_news_goes_to_admins_and_billing() -> None:
    admin = UserFactory(username="root", is_staff=True)
    billing = UserFactory(username="bill", roles=[Role.BILLING])
    UserFactory(username="aud", roles=[Role.AUDITOR])
    UserFactory(username="staff", is_staff=True, is_superuser=False)
    assert list(users_who_may(Act.MANAGE_BILLING)) == [billing, admin]


# --- the admin's groups -------------------------------------------------------------------------


def _labels(group: Group) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


@pytest.fixture
def migrated_groups(db: None) -> None:
    """The role groups as the migration makes them. A test that empties every table (those with
    ``transaction=True``) takes them away; then they are made again the migration's way."""
    if Group.objects.filter(name__in=ROLE_GROUPS.values()).count() == len(ROLE_GROUPS):
        return
    migration = importlib.import_module("apps.accounts.migrations.0006_platform_roles")
    state = MigrationExecutor(connection).loader.project_state(AFTER_ROLES).apps
    migration.make_groups(state, None)


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.AUDITOR, Role.BILLING])
def test_the_migrations_groups_carry_what_the_rule_says(migrated_groups: None, role: Role) -> None:
    """The groups the migration makes and apps/accounts/roles.py agree: a model added later
    without a migration for the auditor's view of it fails here."""
    every = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Permission.objects.select_related("content_type")
    }
    group = Group.objects.get(name=ROLE_GROUPS[role])
    assert _labels(group) == admin_permissions(role, every)


def test_no_role_group_may_change_users_or_groups(migrated_groups: None) -> None:
    for name in ROLE_GROUPS.values():
        labels = _labels(Group.objects.get(name=name))
        assert not {p for p in labels if p.startswith("auth.") and not p.startswith("auth.view")}
        assert not {"accounts.change_user", "accounts.add_user", "accounts.change_team"} & labels


def test_the_auditor_never_reads_sessions_or_refresh_tokens() -> None:
    every = {"sessions.view_session", "accounts.view_oidcidentity", "workloads.view_workload"}
    assert admin_permissions(Role.AUDITOR, every) == {"workloads.view_workload"}


# --- from the identity provider's groups --------------------------------------------------------

ROLE_GROUP_SETTINGS = {
    "operator": ["gpupaas-operators"],
    "auditor": ["gpupaas-auditors"],
    "billing": ["/finance/gpupaas-billing"],
}


def test_plan_maps_each_role_group_like_the_admin_group() -> None:
    plan = core.plan_memberships(
        groups=["gpupaas-auditors", "/finance/gpupaas-billing", "/contractors/gpupaas-operators"],
        teams=[],
        current_idp_team_ids=[],
        admin_groups=["gpupaas-admins"],
        role_groups=ROLE_GROUP_SETTINGS,
    )
    # A nested group named like a role's group grants nothing (never matched by suffix).
    assert plan.platform_roles == {"auditor", "billing"}
    assert plan.is_admin is False


def test_role_groups_are_read_from_their_settings(settings: Any) -> None:
    settings.OIDC_OPERATOR_GROUPS = ["ops"]
    settings.OIDC_AUDITOR_GROUPS = ["audit", "sox"]
    settings.OIDC_BILLING_GROUPS = []
    assert role_groups_setting() == {
        "operator": ["ops"],
        "auditor": ["audit", "sox"],
        "billing": [],
    }


def _sign_in(groups: list[str]) -> User:
    return user_sync_oidc(
        issuer="https://idp.example.com",
        subject="u-olga",
        claims={"groups": groups, "email": "olga@example.com"},
        groups_claim="groups",
        admin_groups=["gpupaas-admins"],
        role_groups=ROLE_GROUP_SETTINGS,
    )


@pytest.mark.django_db
def test_sign_in_gives_the_roles_of_the_groups_and_entry_to_the_admin() -> None:
    user = _sign_in(["gpupaas-operators", "gpupaas-auditors"])
    fresh = User.objects.get(pk=user.pk)
    assert platform_roles(fresh) == {Role.OPERATOR, Role.AUDITOR}
    assert fresh.is_staff is True and fresh.is_superuser is False
    event = AuditEvent.objects.filter(action="auth.login").latest("id")
    assert event.details["platform_roles"] == ["auditor", "operator"]


@pytest.mark.django_db
def test_next_sign_in_takes_back_a_role_whose_group_was_left() -> None:
    _sign_in(["gpupaas-operators", "gpupaas-admins"])
    user = User.objects.get(pk=_sign_in(["gpupaas-auditors"]).pk)
    assert platform_roles(user) == {Role.AUDITOR}
    user = User.objects.get(pk=_sign_in([]).pk)
    assert platform_roles(user) == frozenset()
    assert user.is_staff is False


@pytest.mark.django_db
def test_group_recheck_applies_the_roles_the_same_way() -> None:
    user = _sign_in(["gpupaas-billing"])
    assert platform_roles(User.objects.get(pk=user.pk)) == frozenset()
    user_groups_confirm(
        user=user,
        identity=OidcIdentity.objects.get(user=user),
        claims={"groups": ["/finance/gpupaas-billing"]},
        groups_claim="groups",
        groups_format="auto",
        admin_groups=["gpupaas-admins"],
        role_groups=ROLE_GROUP_SETTINGS,
        refresh_token="r",
    )
    assert platform_roles(User.objects.get(pk=user.pk)) == {Role.BILLING}
    event = AuditEvent.objects.filter(action="auth.groups_refresh").latest("id")
    assert event.details["platform_roles"] == ["billing"]
    assert event.details["platform_roles_before"] == []


@pytest.mark.django_db
def test_roles_lapse_with_the_providers_word() -> None:
    user = _sign_in(["gpupaas-auditors", "gpupaas-admins"])
    user_groups_lapse(user=User.objects.get(pk=user.pk), reason="refused")
    user = User.objects.get(pk=user.pk)
    assert platform_roles(user) == frozenset()
    assert (user.is_staff, user.is_superuser) == (False, False)
    event = AuditEvent.objects.filter(action="auth.groups_lapsed").latest("id")
    assert event.details["platform_roles"] == ["admin", "auditor"]


@pytest.mark.django_db
def test_a_deleted_role_group_is_made_again_at_sign_in() -> None:
    Group.objects.filter(name=ROLE_GROUPS[Role.AUDITOR]).delete()
    user = _sign_in(["gpupaas-auditors"])
    assert platform_roles(User.objects.get(pk=user.pk)) == {Role.AUDITOR}
