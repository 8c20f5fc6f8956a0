"""The cross-team matrix of tests/api/test_outsider_matrix.py, for each platform role on a team
it is not in: the auditor reads every team's objects and every write is refused (403, with the
message); billing reads and sets the team's budget and reads its usage, nothing else; the
operator and a staff user with no role see nothing of the team, as an outsider does."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts.models import User
from apps.accounts.roles import Role
from tests.api.conftest import Client
from tests.api.test_outsider_matrix import OBJECT_ENDPOINTS, ids, snapshot
from tests.credentials.fakes import _fake_cluster  # noqa: F401
from tests.factories import UserFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fake_cluster")]

# Objects of one person (their token, their notices): no platform role reaches them.
PERSONAL = ("/tokens/", "/notifications/")
# What billing may reach of a team it is not in.
BILLING_READS = ("/budget/", "/usage/")
BILLING_WRITES = {("put", "/budget/")}


def _holder(who: str) -> User:
    if who == "staff":
        return UserFactory(username="staff-only", is_staff=True, is_superuser=False)
    return UserFactory(username=who, roles=[Role(who)])


def _call(
    cast: Cast, api: Client, who: str, method: str, template: str, body: dict[str, Any] | None
) -> tuple[Any, bool]:
    path = template.format(**ids(cast))
    client = api(_holder(who), ("write",))
    before = snapshot()
    response = getattr(client, method)(path, body, format="json")
    return response, snapshot() != before


@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_auditor_reads_every_teams_objects_and_every_write_is_refused(
    cast: Cast, api: Client, method: str, template: str, body: dict[str, Any] | None
) -> None:
    response, changed = _call(cast, api, "auditor", method, template, body)
    assert not changed, template
    if any(p in template for p in PERSONAL):
        assert response.status_code == 404, template
    elif method == "get":
        # 409: the logs of a workload not placed yet; the auditor did reach it.
        assert response.status_code in (200, 409), (template, response.content)
    else:
        assert response.status_code == 403, (template, response.content)
        assert response.json()["code"] == "permission_denied"
        assert response.json()["message"], template


@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_billing_reaches_a_teams_budget_and_usage_only(
    cast: Cast, api: Client, method: str, template: str, body: dict[str, Any] | None
) -> None:
    response, changed = _call(cast, api, "billing", method, template, body)
    path = template.split("?")[0]
    reads = method == "get" and path.endswith(BILLING_READS) and "/teams/" in path
    writes = any(method == m and path.endswith(p) for m, p in BILLING_WRITES)
    if reads or writes:
        assert response.status_code == 200, (template, response.content)
        assert changed is writes
        return
    assert not changed, template
    if path.endswith("/budget/approve/"):
        # Approving more work under the hard stop is the team lead's, not billing's.
        assert response.status_code == 403
        assert "lead" in response.json()["message"]
    else:
        assert response.status_code == 404, (template, response.content)


@pytest.mark.parametrize("who", ["operator", "staff"])
@pytest.mark.parametrize(("method", "template", "body"), OBJECT_ENDPOINTS)
def test_operator_and_staff_without_a_role_see_nothing_of_another_team(
    cast: Cast, api: Client, who: str, method: str, template: str, body: dict[str, Any] | None
) -> None:
    response, changed = _call(cast, api, who, method, template, body)
    assert response.status_code == 404, (template, response.content)
    assert not changed


def test_auditor_lists_every_teams_workloads_the_operator_none(cast: Cast, api: Client) -> None:
    theirs = WorkloadFactory(
        team=cast.team, owner=cast.owner, gpu_class=cast.gpu_class, image=cast.image
    )
    listed = api(_holder("auditor")).get("/api/v1/workloads/").json()["results"]
    assert [w["id"] for w in listed] == [theirs.pk]
    assert api(_holder("operator")).get("/api/v1/workloads/").json()["results"] == []


def test_advice_is_read_by_auditors_applied_by_admins_only(cast: Cast, api: Client) -> None:
    body = {"team": "vision", "gpu_class": cast.gpu_class.name}
    auditor = api(_holder("auditor"))
    assert auditor.get("/api/v1/advice/").status_code == 200
    refused = auditor.post("/api/v1/advice/apply/", body, format="json")
    assert refused.status_code == 403
    assert refused.json()["message"] == "Right-sizing advice is for platform admins."
    for who in ("operator", "billing", "staff"):
        assert api(_holder(who)).get("/api/v1/advice/").status_code == 403, who


def test_me_says_which_platform_roles_the_caller_holds(cast: Cast, api: Client) -> None:
    both = UserFactory(username="ops-and-bills", roles=[Role.OPERATOR, Role.BILLING])
    me = api(both).get("/api/v1/me/").json()
    assert me["platform_roles"] == ["billing", "operator"]
    assert me["is_admin"] is False
    admin = api(cast.admin).get("/api/v1/me/").json()
    assert (admin["platform_roles"], admin["is_admin"]) == (["admin"], True)
