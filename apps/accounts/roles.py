"""Pure. Platform roles and what each may do: the one rule every door asks (portal, API, the
Django admin's own checks through the roles' permission groups, the services).

A platform role is held across every team, apart from team membership (member or lead):

- platform admin: everything (Django's superuser: every model permission in the admin too);
- operator: the capacity side: clusters, nodes, maintenance windows and drains;
- auditor: reads everything across teams, changes nothing;
- billing: budgets, prices (GPU classes' hourly costs) and chargeback.

A person may hold several roles; what they may do is the union. The Django staff flag alone
is no role: it lets its holder into the admin, where only the admin's model permissions count.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    AUDITOR = "auditor"
    BILLING = "billing"


class Act(StrEnum):
    """What a platform role may do beyond a person's own teams."""

    # Reads across teams.
    SEE_TEAMS = "see every team's workloads, members, quotas, policies and bookings"
    SEE_SPEND = "see every team's usage, spend, budgets and chargeback"
    SEE_CAPACITY = "see the cluster-wide capacity: every node and GPU, free and booked"
    # Writes across teams.
    ACT_FOR_TEAMS = "act in any team: submit, cancel, open and change its workloads"
    GOVERN_TEAMS = "set team policies, quotas, leads and members; decide bookings and requests"
    MANAGE_CAPACITY = "manage clusters, nodes, maintenance windows and drains"
    MANAGE_BILLING = "set budgets and prices, run chargeback"


# Who the admin's role groups are (Django Groups), by role. The platform admin is the
# superuser flag instead: a group could carry only the permissions that exist when it is made.
ROLE_GROUPS: dict[Role, str] = {
    Role.OPERATOR: "Platform operators",
    Role.AUDITOR: "Platform auditors",
    Role.BILLING: "Platform billing",
}

GRANTS: dict[Role, frozenset[Act]] = {
    Role.ADMIN: frozenset(Act),
    Role.OPERATOR: frozenset({Act.SEE_CAPACITY, Act.MANAGE_CAPACITY}),
    Role.AUDITOR: frozenset({Act.SEE_TEAMS, Act.SEE_SPEND, Act.SEE_CAPACITY}),
    Role.BILLING: frozenset({Act.SEE_SPEND, Act.MANAGE_BILLING}),
}

ROLE_LABELS: dict[Role, str] = {
    Role.ADMIN: "platform admin",
    Role.OPERATOR: "operator",
    Role.AUDITOR: "auditor",
    Role.BILLING: "billing",
}


def may(roles: Iterable[Role], act: Act) -> bool:
    """Whether someone holding ``roles`` may do ``act`` (the union of the roles' grants)."""
    return any(act in GRANTS[role] for role in roles)


def roles_from(*, superuser: bool, group_names: Iterable[str]) -> frozenset[Role]:
    """The platform roles of a person from their superuser flag and role groups' names."""
    held = set(group_names)
    roles = {role for role, name in ROLE_GROUPS.items() if name in held}
    if superuser:
        roles.add(Role.ADMIN)
    return frozenset(roles)


def refusal(act: Act) -> str:
    """The message of a refusal, the same at every door."""
    holders = [ROLE_LABELS[r] for r in Role if act in GRANTS[r]]
    who = ", ".join(holders[:-1]) + f" or {holders[-1]}" if len(holders) > 1 else holders[0]
    return f"Only a {who} may {act.value}."


# --- the Django admin ------------------------------------------------------------------------
# Each role's group carries the model permissions that let the admin's own checks enforce it
# ("app_label.codename"). The platform admin is a superuser and needs none. The groups are made
# by a data migration (accounts 0006) that writes these down as they were then;
# tests/accounts/test_platform_roles.py keeps the groups and this table the same.

OPERATOR_PERMISSIONS = frozenset(
    {
        *(f"catalog.{a}_cluster" for a in ("add", "change", "delete", "view")),
        *(f"catalog.{a}_nodemaintenance" for a in ("add", "change", "delete", "view")),
        "catalog.view_clusternode",
        "catalog.view_gpuclass",
        "telemetry.view_nodehealthreport",
    }
)
BILLING_PERMISSIONS = frozenset(
    {
        "catalog.view_gpuclass",
        "catalog.change_gpuclass",  # its hourly cost only: the admin locks the other fields
        "budgets.view_budget",
        "budgets.view_budgetspend",
        "telemetry.view_workloadusage",
        "telemetry.view_usageday",
        "accounts.view_team",
    }
)
# Secrets' holders: sessions and the provider's refresh tokens are no auditor's to read.
AUDITOR_UNSEEN = frozenset(
    {"sessions.view_session", "accounts.view_usersession", "accounts.view_oidcidentity"}
)


def admin_permissions(role: Role, every_permission: Iterable[str]) -> frozenset[str]:
    """The permissions of the role's group, out of ``every_permission`` there is: the auditor
    views every model (but the secrets' holders), the others what their table names."""
    known = set(every_permission)
    if role is Role.AUDITOR:
        return frozenset(
            p for p in known if p.split(".", 1)[1].startswith("view_") and p not in AUDITOR_UNSEEN
        )
    if role is Role.OPERATOR:
        return OPERATOR_PERMISSIONS & known
    if role is Role.BILLING:
        return BILLING_PERMISSIONS & known
    return frozenset()
