"""Each portal form submitted with the keyboard alone, and the small layout defects of the
request form, the quota table and the token page, in Chromium against the live server."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.accounts.models import ApiToken
from apps.datasets.models import Dataset
from apps.telemetry.models import UsageDay
from apps.workloads.models import RequestTemplate, Workload
from tests.factories import UserFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser

MAX_TABS = 120


def tab_to(page: Any, selector: str) -> None:
    """Press Tab until the element matching ``selector`` has the focus."""
    for _ in range(MAX_TABS):
        if page.evaluate("(s) => document.activeElement?.matches(s) ?? false", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{selector} cannot be reached with Tab")


def type_into(page: Any, selector: str, text: str) -> None:
    tab_to(page, selector)
    page.keyboard.press("Control+A")
    page.keyboard.type(text)


def choose(page: Any, selector: str, label: str) -> None:
    """Pick an option of a select by typing the start of its label, as a keyboard user does."""
    tab_to(page, selector)
    page.keyboard.type(label)
    chosen = page.evaluate(
        "(s) => document.querySelector(s).selectedOptions[0].textContent", selector
    )
    assert chosen.startswith(label), chosen


def test_training_job_and_sweep_forms_submit_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/workloads/new/training/")
    type_into(page, "#id_name", "kb-train")
    choose(page, "#id_image", "PyTorch")
    type_into(page, "#id_command", "python train.py")
    tab_to(page, "button[value=submit]")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile("kb-train"))).to_be_visible()

    page.goto(page.base_url + "/workloads/new/sweep/")
    type_into(page, "#id_name", "kb-sweep")
    type_into(page, "#id_grid", "lr=0.1,0.01")
    choose(page, "#id_image", "PyTorch")
    type_into(page, "#id_command", "python train.py")
    tab_to(page, "button[value=submit]")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile("kb-sweep"))).to_be_visible()
    assert set(Workload.objects.values_list("name", flat=True)) >= {
        "kb-train",
        "kb-sweep",
    }


def test_template_sizing_token_and_dataset_forms_submit_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.lead)
    page.goto(page.base_url + "/workloads/new/notebook/")
    type_into(page, "#id_name", "kb-template")
    tab_to(page, "details.save-template > summary")
    page.keyboard.press("Enter")  # opens "Save as a template"
    type_into(page, "#id_template-name", "kb")
    tab_to(page, "button[value=save-template]")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Template “kb” saved.")).to_be_visible()
    assert RequestTemplate.objects.filter(name="kb").exists()

    page.goto(page.base_url + "/workloads/sizing/")
    type_into(page, "#id_params_billions", "13")
    choose(page, "#id_task", "Full")
    tab_to(page, "form.sizing-form button[type=submit]")
    page.keyboard.press("Enter")
    expect(page.locator(".sizing-result")).to_contain_text("optimizer states")

    page.goto(page.base_url + "/accounts/tokens/")
    type_into(page, "#id_name", "kb-token")
    tab_to(page, "form button.primary")
    page.keyboard.press("Enter")
    expect(page.locator("#new-token")).to_be_visible()
    assert ApiToken.objects.filter(name="kb-token").exists()

    page.goto(page.base_url + f"/teams/{portal.cast.team.slug}/datasets/")
    type_into(page, "#id_name", "kbdata")
    type_into(page, "#id_claim", "kb-claim")
    tab_to(page, "form button.primary")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Dataset “kbdata” registered.")).to_be_visible()
    assert Dataset.objects.filter(name="kbdata").exists()


def test_new_token_shows_its_underscores_and_copies_to_the_clipboard(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(page.base_url + "/accounts/tokens/")
    page.get_by_label("Name").fill("copy-me")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token")
    value = token.inner_text().strip()
    assert value.startswith("gpp_") and value.count("_") >= 2
    # Nothing of it is clipped: the box is as tall and as wide as its text.
    box = token.evaluate("e => [e.scrollHeight <= e.clientHeight, e.scrollWidth <= e.clientWidth]")
    assert box == [True, True]
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#new-token-copied")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("navigator.clipboard.readText()") == value


def test_quota_table_is_not_clipped_at_1366_px(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.lead, viewport=(1366, 768))
    page.goto(page.base_url + "/")
    table = page.locator(".quota-table")
    expect(table).to_be_visible()
    card = table.locator("xpath=ancestor::section[1]")
    limit = table.get_by_role("columnheader", name="Limit")
    card_box, limit_box = card.bounding_box(), limit.bounding_box()
    assert limit_box["x"] + limit_box["width"] <= card_box["x"] + card_box["width"]
    assert card.evaluate("e => e.scrollWidth <= e.clientWidth")


def test_sizing_helper_comes_before_submit_on_a_phone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner, viewport=(375, 812))
    page.goto(page.base_url + "/workloads/new/notebook/")
    sizing = page.locator("aside.sizing").bounding_box()
    submit = page.get_by_role("button", name="Submit request").bounding_box()
    assert sizing["y"] < submit["y"]


def test_a_user_without_a_team_sees_only_links_that_lead_somewhere(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(UserFactory(username="loner"))
    page.goto(page.base_url + "/accounts/no-team/")
    links = page.locator("nav[aria-label=Main] a")
    targets = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert "/accounts/no-team/" in targets and "/" not in targets
    for target in targets:
        page.goto(page.base_url + target)
        assert page.url == page.base_url + target, f"{target} redirected to {page.url}"


def test_usage_chart_legend_pairs_allocated_and_used_of_a_class_by_colour(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    today = date.today()
    for gpu_class in (portal.cast.gpu_class, portal.mig):
        workload = portal.workload(gpu_class=gpu_class, state="running")
        for back in range(3):
            UsageDay.objects.create(
                day=today - timedelta(days=back),
                workload=workload,
                team=portal.cast.team,
                owner=portal.cast.owner,
                gpu_class=gpu_class,
                allocated_gpu_seconds=7200,
                used_gpu_seconds=3600,
            )
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/usage/")
    legend = page.locator("#mine-chart .u-legend .u-series")
    expect(legend.first).to_be_visible()
    rows = legend.evaluate_all(
        """rows => rows.map(r => [r.querySelector('.u-label')?.textContent || '',
           getComputedStyle(r.querySelector('.u-marker') || r).borderColor])"""
    )
    colours = {label: colour for label, colour in rows if ": " in label}
    h100 = portal.cast.gpu_class.name
    assert colours[f"{h100}: allocated (dashed)"] == colours[f"{h100}: used (solid)"]
    assert colours[f"{h100}: used (solid)"] != colours[f"{portal.mig.name}: used (solid)"]


def test_team_workload_filter_form_submits_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    portal.workload(name="kb-running", state="running")
    page = signed_in(portal.cast.lead)
    page.goto(page.base_url + f"/teams/{portal.cast.team.slug}/")
    choose(page, "form.filters #id_state", "Active")
    tab_to(page, "form.filters button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"state=active"))
    expect(page.get_by_role("link", name="kb-running")).to_be_visible()
