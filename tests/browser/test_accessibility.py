"""Keyboard use, labels and small screens, in Chromium against the live server (no cluster
needed: these pages only read the database)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.workloads import core
from apps.workloads.models import Workload
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser

UNLABELLED_FIELDS = """() => [...document.querySelectorAll('input, select, textarea')]
  .filter(el => el.type !== 'hidden' && !el.closest('[hidden]'))
  .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label'))
  .map(el => el.name || el.id)"""


def test_notebook_request_can_be_filled_and_submitted_with_the_keyboard_alone(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/workloads/new/notebook/")
    page.get_by_label(re.compile(r"^Name")).focus()
    page.keyboard.type("keyboard-nb")
    page.keyboard.press("Tab")  # team
    page.keyboard.press("Tab")  # GPU class
    focused = page.evaluate("document.activeElement.id")
    assert focused == "id_gpu_class"
    # The focused field has a visible focus ring.
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Tab")  # amount
    assert page.evaluate("document.activeElement.id") == "id_gpu_milli"
    page.get_by_label("Image").select_option(label="JupyterLab")
    page.get_by_label(re.compile(r"^Name")).focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile("keyboard-nb"))).to_be_visible()
    assert Workload.objects.get(name="keyboard-nb").state == core.PENDING


def test_form_errors_take_focus_and_keep_the_input(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    page.goto(page.base_url + "/workloads/new/notebook/")
    page.get_by_label("Environment variables").fill("not a variable")
    page.get_by_role("button", name="Submit request").click()
    summary = page.get_by_role("alert")
    expect(summary).to_contain_text("Name: Give the workload a name.")
    expect(summary).to_be_focused()
    expect(page.get_by_label("Environment variables")).to_have_value("not a variable")
    summary.get_by_role("link", name=re.compile("^Name")).click()
    expect(page.get_by_label(re.compile(r"^Name"))).to_be_focused()


def test_every_field_has_a_label_and_pages_fit_a_phone(
    portal: Portal, signed_in: Callable[..., Any], artifacts_dir: Path
) -> None:
    workload = portal.workload(
        name="queued-train",
        state=core.QUEUED,
        queue_position=1,
        last_reason="Team quota reached.",
    )
    pages = {
        "request-training": "/workloads/new/training/",
        "request-sweep": "/workloads/new/sweep/",
        "team": f"/teams/{portal.cast.team.slug}/",
        "profile": "/accounts/profile/",
        "tokens": "/accounts/tokens/",
        "templates": "/workloads/templates/",
        "sizing": "/workloads/sizing/?params_billions=70&precision=bf16&task=lora",
        "workload-queued": f"/workloads/{workload.pk}/",
        "overview": "/overview/",
        "budget": f"/teams/{portal.cast.team.slug}/budget/",
        "quota-requests": "/quota-requests/",
        "reservations": f"/reservations/?gpu_class={portal.cast.gpu_class.pk}",
        "policy": f"/teams/{portal.cast.team.slug}/policy/",
        "workloads-list-page": "/workloads/?q=train&sort=name",
        "notices-page": "/notifications/",
        "notification-preferences": "/notifications/preferences/",
    }
    desktop = signed_in(portal.cast.lead)
    phone = signed_in(portal.cast.lead, viewport=(375, 812))
    for name, path in pages.items():
        desktop.goto(desktop.base_url + path)
        assert desktop.evaluate(UNLABELLED_FIELDS) == [], name
        desktop.screenshot(path=str(artifacts_dir / f"{name}.png"), full_page=True)
        phone.goto(phone.base_url + path)
        assert phone.evaluate("document.documentElement.scrollWidth") <= 375, name
        phone.screenshot(path=str(artifacts_dir / f"{name}-phone.png"), full_page=True)
