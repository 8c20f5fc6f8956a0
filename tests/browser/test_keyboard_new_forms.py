"""The portal's newer forms submitted with the keyboard alone (Tab, typing, Space, Enter) in
Chromium against the live server, each checked by what it wrote to the database: secrets,
notification preferences, quota requests, reservations, a team's budget and policy, the
workloads list's filters and bulk cancel, and an endpoint's scale form."""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.budgets.models import Budget
from apps.credentials.models import Secret
from apps.notifications.core import NoticeEvent
from apps.notifications.models import NotificationPreference
from apps.orchestration.credentials import NO_CLUSTER
from apps.policies.models import TeamPolicy
from apps.quotas.models import QuotaRequest
from apps.reservations.models import Reservation
from apps.workloads import core
from apps.workloads.models import Workload
from tests.browser.test_form_keyboard_and_layout import choose, tab_to, type_into
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.factories import ImageFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser

WEBHOOK = "https://127.0.0.1:9/hook"


def submit(page: Any, selector: str) -> Any:
    """Tab to the submit button ``selector``, press Enter and wait for the answer's page."""
    tab_to(page, selector)
    with page.expect_navigation() as answer:
        page.keyboard.press("Enter")
    return answer.value


def press_on(page: Any, selector: str, key: str) -> None:
    """Tab to ``selector`` and press ``key`` there (Space ticks a box, Enter submits)."""
    tab_to(page, selector)
    page.keyboard.press(key)


def test_secret_form_saves_a_secret_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any], fake_cluster: FakeCluster
) -> None:
    page = signed_in(portal.cast.lead)
    slug = portal.cast.team.slug
    page.goto(page.base_url + f"/teams/{slug}/secrets/")
    type_into(page, "#id_name", "wandb")
    type_into(page, "#id_key", "api_key")
    type_into(page, "#id_value", "kb-s3cret")
    submit(page, "form button.primary")
    expect(page.get_by_text("Secret “wandb” saved; its value is not shown.")).to_be_visible()
    secret = Secret.objects.get(team=portal.cast.team, name="wandb")
    assert (secret.scope, secret.keys) == ("team", ["api_key"])
    assert fake_cluster.secrets[(portal.cast.team.namespace, secret.k8s_name)] == {
        "api_key": "kb-s3cret"
    }

    # A member ticks "Personal" with Space: the secret is theirs only.
    page = signed_in(portal.cast.teammate)
    page.goto(page.base_url + f"/teams/{slug}/secrets/")
    type_into(page, "#id_name", "hf")
    press_on(page, "#id_personal", "Space")
    type_into(page, "#id_value", "hf-s3cret")
    submit(page, "form button.primary")
    expect(page.get_by_text("Secret “hf” saved; its value is not shown.")).to_be_visible()
    assert Secret.objects.get(name="hf").owner == portal.cast.teammate


def test_secret_form_without_a_cluster_answers_with_a_form_error(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.lead)
    page.goto(page.base_url + f"/teams/{portal.cast.team.slug}/secrets/")
    type_into(page, "#id_name", "wandb")
    type_into(page, "#id_value", "kb-s3cret")
    answer = submit(page, "form button.primary")
    assert answer.status == 400  # the form again, with the reason, never a server error
    expect(page.get_by_role("alert")).to_contain_text(NO_CLUSTER)
    expect(page.locator("#id_name")).to_have_value("wandb")
    assert not Secret.objects.exists()


def test_notification_preferences_save_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    user = portal.cast.owner
    page = signed_in(user)
    page.goto(page.base_url + "/notifications/preferences/")
    failed = f"input[name=webhook_events][value={NoticeEvent.FAILED}]"
    press_on(page, failed, "Space")
    type_into(page, "#id_webhook_url", WEBHOOK)
    submit(page, "form button.primary")
    expect(page.get_by_text("Your notification choices are saved.")).to_be_visible()
    prefs = NotificationPreference.objects.get(user=user)
    assert (prefs.webhook_events, prefs.webhook_url) == ([NoticeEvent.FAILED.value], WEBHOOK)
    expect(page.locator(failed)).to_be_checked()


def test_quota_request_is_sent_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/quota-requests/")
    choose(page, "#id_kind", "The team")
    type_into(page, "#id_amount", "0.5")
    type_into(page, "#id_justification", "A bigger sweep before the deadline.")
    submit(page, "form button.primary")
    expect(page.get_by_text(re.compile(r"Quota request #\d+ sent\."))).to_be_visible()
    row = QuotaRequest.objects.get()
    assert (row.requested_by, row.kind, row.amount_milli) == (portal.cast.owner, "team", 500)
    assert row.justification == "A bigger sweep before the deadline."


def test_reservation_is_booked_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.lead)
    page.goto(page.base_url + f"/reservations/?gpu_class={portal.cast.gpu_class.pk}")
    type_into(page, "#id_count", "1")
    type_into(page, "#id_note", "kb demo")
    submit(page, "form[method=post] button.primary")
    expect(
        page.get_by_text(re.compile(r"Reservation #\d+ (booked|holds its place)"))
    ).to_be_visible()
    row = Reservation.objects.get()
    assert (row.team, row.gpu_class, row.total_milli, row.note) == (
        portal.cast.team,
        portal.cast.gpu_class,
        1000,
        "kb demo",
    )


def test_budget_and_policy_forms_save_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    team = portal.cast.team
    page = signed_in(portal.cast.admin)
    page.goto(page.base_url + f"/teams/{team.slug}/budget/")
    type_into(page, "#id_amount", "1234.50")
    type_into(page, "#id_thresholds", "60, 90")
    press_on(page, "#id_hard_stop", "Space")
    submit(page, "form[action$='/budget/set/'] button.primary")
    expect(page.get_by_text(f"Budget of {team.name} saved.")).to_be_visible()
    budget = Budget.objects.get(team=team)
    assert (budget.amount, budget.thresholds, budget.hard_stop) == (
        Decimal("1234.50"),
        [60, 90],
        True,
    )

    page.goto(page.base_url + f"/teams/{team.slug}/policy/")
    press_on(page, f"input[name=allowed_classes][value='{portal.mig.name}']", "Space")
    type_into(page, "#id_max_gpus", "2")
    type_into(page, "#id_max_runtime_training_hours", "12")
    submit(page, "form[action$='/policy/set/'] button.primary")
    expect(page.get_by_text(f"Policy of {team.name} saved.")).to_be_visible()
    policy = TeamPolicy.objects.get(team=team)
    assert list(policy.allowed_classes.values_list("name", flat=True)) == [portal.mig.name]
    assert policy.max_gpu_milli_per_workload == 2000
    assert policy.max_runtime_training_seconds == 12 * 3600


def test_workload_list_filters_and_bulk_cancels_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    keep = portal.workload(name="kb-keep", state=core.RUNNING)
    stop = portal.workload(name="kb-stop", state=core.RUNNING)
    portal.workload(name="kb-done", state=core.SUCCEEDED)
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/workloads/")
    type_into(page, "#id_q", "kb-")
    choose(page, "#id_state", "Active")
    submit(page, "form[role=search] button[type=submit]")
    page.wait_for_url(re.compile(r"state=active"))
    names = page.locator('table.workload-list td[data-label="Name"]').all_inner_texts()
    assert sorted(names) == ["kb-keep", "kb-stop"]

    press_on(page, f"#tick-{stop.pk}", "Space")
    expect(page.locator(f"#tick-{stop.pk}")).to_be_checked()
    # The form asks to confirm; a keyboard user answers the dialog with Enter.
    page.once("dialog", lambda dialog: dialog.accept())
    submit(page, "#bulk-cancel")
    expect(page.get_by_role("status")).to_contain_text("Cancelled 1: kb-stop.")
    assert Workload.objects.get(pk=stop.pk).state == core.CANCELLED
    assert Workload.objects.get(pk=keep.pk).state == core.RUNNING


def test_endpoint_scale_form_submits_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    image = ImageFactory(
        name="vLLM server", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving"
    )
    endpoint = portal.workload(
        name="kb-llm",
        owner=portal.cast.owner,
        image=image,
        kind=core.KIND_INFERENCE,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        replicas=3,
        params={
            "endpoint": {
                "port": 8000,
                "health_path": "/health",
                "min_replicas": 1,
                "max_replicas": 4,
                "target_replicas": 3,
                "scale_metric": "rps",
                "scale_target": 10.0,
            }
        },
    )
    page = signed_in(portal.cast.lead)
    page.goto(page.base_url + f"/workloads/{endpoint.pk}/")
    type_into(page, "#scale-replicas", "2")
    page.keyboard.press("Enter")  # Enter in the field submits its form
    expect(page.get_by_text("“kb-llm” asked to run 2 replica(s).")).to_be_visible()
    endpoint.refresh_from_db()
    assert endpoint.replicas == 2
    assert endpoint.params["endpoint"]["target_replicas"] == 2
