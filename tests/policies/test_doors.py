"""A team's policy and its budget's hard stop are enforced by the one request rule set: the
portal, the API and the CLI refuse the same request, on the same field, naming the policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.roles import Role
from apps.accounts.services import api_token_create
from apps.budgets.services import budget_set, budget_spend_record, budget_stop_lift
from apps.catalog.models import Image
from apps.common.ratelimit import rate_limiter
from apps.policies.models import TeamPolicy
from apps.policies.services import team_policy_set
from apps.workloads.models import Workload
from gpupaas_cli import exits
from tests.cli.test_cli_live import CliFor
from tests.factories import ImageFactory, UserFactory
from tests.plugins.cast import Cast
from tests.workloads.test_request_matrix import (
    ROWS,
    Row,
    World,
    api_body,
    form_data,
    job,
    nb,
    sweep,
)

pytestmark = pytest.mark.django_db

POLICY_NAME = "Vision's team policy"


def restrict(world: World) -> None:
    world.images["unapproved"] = ImageFactory(name="R notebook", kind=Image.Kind.NOTEBOOK)
    team_policy_set(
        actor=world.cast.admin,
        team=world.cast.team,
        allowed_classes=[world.classes[k] for k in ("whole", "timeslice", "mig")],
        allowed_images=[world.images[k] for k in ("any", "notebook", "training")],
        max_gpu_milli_per_workload=2000,
        max_runtime_seconds={"training": 4 * 3600},
        idle_timeout_seconds={"notebook": 30 * 60},
        exclusive_classes=[world.classes["timeslice"]],
    )


REFUSED = [
    job("policy-class-not-allowed", "hami", 250, "gpu_class"),
    nb("policy-image-not-allowed", "mig", 500, "image", image="unapproved"),
    job("policy-too-many-gpus", "whole", 1000, "gpu_milli", replicas=3),
    sweep(
        "policy-sweep-too-many-at-once",
        "whole",
        1000,
        "gpu_milli",
        parallelism=3,
        grid={"lr": ["1", "2", "3"]},
    ),
    job("policy-runtime-above-the-cap", "whole", 1000, "max_runtime_seconds", runtime=5 * 3600),
    nb("policy-no-sharing-with-other-teams", "timeslice", 250, "gpu_milli"),
]


def doors(world: World, row: Row) -> tuple[dict[str, list[str]], dict[str, list[str]], int]:
    user = world.user(row.user)
    portal = Client()
    portal.force_login(user)
    _, token = api_token_create(actor=user, name="t", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    rate_limiter().reset()
    from_api = api.post("/api/v1/workloads/", api_body(row, world), format="json")
    from_portal = portal.post(f"/workloads/new/{row.kind}/", form_data(row, world))
    assert from_api.status_code == 400, from_api.json()
    assert from_portal.status_code == 400
    form = from_portal.context["form"]
    return from_api.json()["fields"], {k: list(v) for k, v in form.errors.items()}, 0


@pytest.mark.parametrize("row", REFUSED, ids=lambda r: r.id)
def test_policy_refused_by_portal_and_api_alike_naming_the_policy(world: World, row: Row) -> None:
    restrict(world)
    fields, form_errors, _ = doors(world, row)
    assert row.refused in fields, fields
    assert POLICY_NAME in fields[row.refused][0]
    assert any(POLICY_NAME in m for messages in form_errors.values() for m in messages)
    assert fields[row.refused][0] in [m for ms in form_errors.values() for m in ms]
    assert Workload.objects.count() == 0


def test_the_same_requests_pass_without_a_policy(world: World) -> None:
    accepted = {r.id: r for r in ROWS if r.refused is None}
    assert accepted["training-hami-fraction"].gpu_class == "hami"
    for row in REFUSED[:1]:
        ok = replace(row, refused=None)
        user = world.user(ok.user)
        _, token = api_token_create(actor=user, name="t", scopes=["write"], expires_at=None)
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        assert api.post("/api/v1/workloads/", api_body(ok, world), format="json").status_code == 201


def test_policy_caps_and_defaults_are_recorded_when_not_asked(world: World) -> None:
    restrict(world)
    _, token = api_token_create(actor=world.cast.owner, name="t", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    made = api.post("/api/v1/workloads/", api_body(job("j", "whole", 1000), world), format="json")
    assert made.status_code == 201, made.json()
    assert Workload.objects.get(pk=made.json()["id"]).max_runtime_seconds == 4 * 3600
    made = api.post("/api/v1/workloads/", api_body(nb("n", "mig", 500), world), format="json")
    assert Workload.objects.get(pk=made.json()["id"]).idle_timeout_seconds == 30 * 60


def spend_it(world: World, *, hard_stop: bool = True) -> None:
    now = timezone.now()
    budget_set(
        actor=world.cast.admin,
        team=world.cast.team,
        month=now.date(),
        amount=Decimal("1000"),
        hard_stop=hard_stop,
    )
    budget_spend_record(
        team=world.cast.team,
        month=now.date(),
        spent=Decimal("1000.50"),
        run_rate_per_hour=Decimal("9"),
        now=now,
    )


def test_budget_hard_stop_admits_only_batch_or_a_leads_work(world: World) -> None:
    spend_it(world)
    row = job("over-budget", "whole", 1000, "priority_class")
    fields, form_errors, _ = doors(world, row)
    message = fields["priority_class"][0]
    assert message.startswith("Vision's budget for ")
    assert "1,000.50 EUR of 1,000.00 EUR" in message and "hard stop" in message
    assert form_errors["priority_class"] == [message]
    _, token = api_token_create(actor=world.cast.owner, name="b", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    batch = replace(row, priority="batch", refused=None)
    assert api.post("/api/v1/workloads/", api_body(batch, world), format="json").status_code == 201
    lead = replace(row, user="lead", refused=None)
    _, lead_token = api_token_create(
        actor=world.cast.lead, name="l", scopes=["write"], expires_at=None
    )
    as_lead = APIClient()
    as_lead.credentials(HTTP_AUTHORIZATION=f"Bearer {lead_token}")
    assert (
        as_lead.post("/api/v1/workloads/", api_body(lead, world), format="json").status_code == 201
    )
    # The lead approves more for this month: members' work is admitted again.
    budget_stop_lift(actor=world.cast.lead, team=world.cast.team, month=timezone.now().date())
    again = replace(row, refused=None, name="after-approval")
    assert api.post("/api/v1/workloads/", api_body(again, world), format="json").status_code == 201


def test_a_spent_budget_without_hard_stop_refuses_nothing(world: World) -> None:
    spend_it(world, hard_stop=False)
    _, token = api_token_create(actor=world.cast.owner, name="b", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    row = job("fine", "whole", 1000)
    assert api.post("/api/v1/workloads/", api_body(row, world), format="json").status_code == 201


def test_last_months_spend_does_not_stop_this_month(world: World) -> None:
    now = timezone.now()
    last_month = (now.replace(day=1) - timedelta(days=1)).date()
    budget_set(
        actor=world.cast.admin,
        team=world.cast.team,
        month=last_month,
        amount=Decimal("10"),
        hard_stop=True,
    )
    budget_spend_record(
        team=world.cast.team,
        month=last_month,
        spent=Decimal("99"),
        run_rate_per_hour=Decimal(0),
        now=now,
    )
    _, token = api_token_create(actor=world.cast.owner, name="b", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    row = job("new-month", "whole", 1000)
    assert api.post("/api/v1/workloads/", api_body(row, world), format="json").status_code == 201


@pytest.mark.django_db(transaction=True)
def test_the_cli_refuses_with_the_policys_message(world: World, cli_for: CliFor) -> None:
    restrict(world)
    owner = cli_for(world.cast.owner)
    args = ["--gpu-class", world.classes["hami"].name, "--image", world.images["training"].name]
    refused = owner("submit", "job", "--name", "j", *args, "--gpu", "0.25", "--", "python", "t.py")
    assert refused.exit_code == exits.INVALID, refused.output
    assert "gpu_class: Vision's team policy allows only these GPU classes" in refused.stderr
    spend_it(world)
    args = ["--gpu-class", world.classes["whole"].name, "--image", world.images["training"].name]
    stopped = owner("submit", "job", "--name", "j", *args, "--gpu", "1", "--", "python", "t.py")
    assert stopped.exit_code == exits.INVALID, stopped.output
    assert "priority_class: Vision's budget for" in stopped.stderr
    assert Workload.objects.count() == 0


@pytest.mark.parametrize(
    ("role", "status"), [(Role.AUDITOR, 403), (Role.OPERATOR, 404), (Role.BILLING, 404)]
)
def test_only_a_platform_admin_sets_a_policy_whatever_the_door(
    cast: Cast, role: Role, status: int
) -> None:
    """The auditor sees the team's policy and is refused with the same message at both doors;
    the operator and billing do not see the team's policy at all."""
    holder = UserFactory(username=f"{role.value}-person", roles=[role])
    portal = Client()
    portal.force_login(holder)
    _, token = api_token_create(actor=holder, name="t", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    from_portal = portal.post("/teams/vision/policy/set/", {"max_gpu_milli_per_workload": "1"})
    from_api = api.put(
        "/api/v1/teams/vision/policy/", {"max_gpu_milli_per_workload": 1000}, format="json"
    )
    assert (from_portal.status_code, from_api.status_code) == (status, status)
    if status == 403:
        message = "Only platform admins set team policies."
        assert message in from_portal.content.decode()
        assert from_api.json()["message"] == message
    assert not TeamPolicy.objects.exists()
