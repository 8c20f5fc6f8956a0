"""Notices on the whole platform: a training job runs and finishes on the simulated cluster,
its owner sees it in the portal's notice list, and the e-mail arrives at a real SMTP server
(rendered in Chromium for a screenshot)."""

from __future__ import annotations

import re
from collections.abc import Callable
from email.message import Message
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.accounts.models import User
from apps.notifications import services as notifications
from apps.notifications import tasks
from apps.notifications.models import Delivery
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.browser.conftest import Platform
from tests.plugins.receivers import SmtpServer, WebhookReceiver
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]


def _html(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/html":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError("no HTML part")


def test_a_finished_job_is_a_notice_in_the_portal_an_email_and_a_webhook(
    platform: Platform,
    new_page: Callable[..., Any],
    mail_settings: SmtpServer,
    webhook_receiver: WebhookReceiver,
    settings: Any,
) -> None:
    settings.PORTAL_URL = platform.url
    page = new_page()
    platform.sign_in(page, "alice")
    alice = User.objects.get(username="alice")
    assert alice.email
    # Alice chooses her channels in the portal: by default it lists only what needs attention
    # (the routine admitted, running and finished go to the daily digest); she wants them too.
    page.goto(f"{platform.url}/notifications/preferences/")
    portal = page.get_by_role("group", name="In the portal")
    for routine in ("Workload admitted", "Workload running", "Workload finished"):
        expect(portal.get_by_label(routine)).not_to_be_checked()
        portal.get_by_label(routine).check()
    expect(
        page.get_by_role("group", name="In a daily e-mail digest").get_by_label("Workload running")
    ).to_be_checked()
    email = page.get_by_role("group", name="By e-mail")
    email.get_by_label("Workload finished").check()
    webhook = page.get_by_role("group", name="By webhook")
    webhook.get_by_label("Workload finished").check()
    page.get_by_label("Webhook URL").fill(webhook_receiver.url)
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_contain_text("saved")

    job = workload_submit(
        actor=alice,
        team=platform.vision,
        gpu_class=platform.classes["h100"],
        image=platform.images["training"],
        request=WorkloadRequest.of(
            kind="training",
            name="resnet-short",
            gpu_milli=1000,
            replicas=1,
            command=["python", "train.py"],
            max_runtime_seconds=3600,
            params={"pod_annotations": {"kubesim.io/run-duration": "2s"}},
        ),
    )
    # The scheduler admits it, the cluster runs it for 2 s, the status sync sees it finish.
    wait_for(
        lambda: Delivery.objects.filter(notice__user=alice, notice__event="finished").count() == 2,
        timeout=60,
    )
    page.goto(f"{platform.url}/")
    notices = page.get_by_role("link", name=re.compile(r"^Notices"))
    expect(notices.locator(".badge")).to_have_text("3")  # admitted, running, finished
    notices.click()
    listing = page.get_by_role("list", name="Notices")
    finished = listing.get_by_role("listitem").filter(has_text="Training job resnet-short finished")
    expect(finished).to_be_visible()
    expect(listing).to_contain_text("Training job resnet-short is running")
    expect(
        finished.get_by_role("link", name="Training job resnet-short finished")
    ).to_have_attribute("href", f"/workloads/{job.pk}/")
    platform.screenshot(page, "notices")

    # What the workers do: deliver each queued e-mail and webhook (once).
    for delivery in Delivery.objects.filter(notice__user=alice):
        tasks.notice_deliver.apply(args=[delivery.pk])
        assert notifications.delivery_attempt(delivery_id=delivery.pk) == "skipped"
    [message] = mail_settings.messages()
    assert message["Subject"] == "[gpupaas] Training job resnet-short finished"
    assert message["To"] == alice.email
    [hook] = webhook_receiver.received
    assert hook["event"] == "finished"
    assert hook["text"].startswith("Training job resnet-short finished\n")
    assert hook["text"].endswith(f"{platform.url}/workloads/{job.pk}/")

    mail_page = new_page(viewport=(700, 500))
    mail_page.set_content(_html(message))
    expect(
        mail_page.get_by_role("heading", name="Training job resnet-short finished")
    ).to_be_visible()
    expect(mail_page.get_by_role("link", name="Open")).to_have_attribute(
        "href", f"{platform.url}/workloads/{job.pk}/"
    )
    platform.screenshot(mail_page, "notification-email")

    # Marking everything read clears the count in the menu.
    page.get_by_role("button", name="Mark all read").click()
    expect(notices.locator(".badge")).to_have_count(0)
    assert page.js_errors == [] and mail_page.js_errors == []
