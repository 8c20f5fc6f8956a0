"""Notices leave by e-mail (a real SMTP server process) and webhook (a real HTTP receiver on
loopback): the right content, retried after a failure, never twice."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from email.message import Message
from typing import Any

import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection

from apps.notifications import services, tasks
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Delivery
from gpupaas.celery import app as celery_app
from tests.plugins.cast import Cast
from tests.plugins.receivers import SmtpServer, WebhookReceiver
from tests.waiting import wait_for

Capture = Callable[..., AbstractContextManager[list[Callable[[], Any]]]]


def _prefs(cast: Cast, url: str = "", email: list[str] | None = None) -> None:
    cast.owner.email = "owner@example.com"
    cast.owner.save()
    services.notification_preferences_set(
        actor=cast.owner,
        email_events=["failed"] if email is None else email,
        webhook_events=["failed"] if url else [],
        portal_events=["failed"],
        webhook_url=url,
    )


def _fail(cast: Cast, key: str = "workload-7-failed") -> None:
    services.notify(
        event=NoticeEvent.FAILED,
        users=[cast.owner],
        title="train-7 failed",
        body="The container exited with code 1 after 3 min.",
        key=key,
        link="/workloads/7/",
        team=cast.team,
    )


def _deliver_all() -> None:
    for pk in Delivery.objects.values_list("pk", flat=True):
        tasks.notice_deliver.apply(args=[pk])


def _text(message: Message) -> str:
    for part in message.walk():
        if part.get_content_type() == "text/plain":
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            return payload.decode()
    raise AssertionError("no text part")


@pytest.mark.django_db
def test_the_email_arrives_with_subject_body_and_link(
    cast: Cast, mail_settings: SmtpServer, settings: Any
) -> None:
    settings.PORTAL_URL = "https://gpu.example.com"
    _prefs(cast)
    _fail(cast)
    _deliver_all()
    [message] = mail_settings.messages()
    assert message["Subject"] == "[gpupaas] train-7 failed"
    assert message["To"] == "owner@example.com"
    text = _text(message)
    assert "The container exited with code 1 after 3 min." in text
    assert "Open: https://gpu.example.com/workloads/7/" in text
    assert {p.get_content_type() for p in message.walk()} >= {"text/plain", "text/html"}
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("sent", 1)


@pytest.mark.django_db
def test_an_event_not_chosen_for_email_sends_no_email(
    cast: Cast, mail_settings: SmtpServer
) -> None:
    _prefs(cast, email=["running"])
    _fail(cast)
    _deliver_all()
    assert mail_settings.messages() == []


@pytest.mark.django_db
def test_email_is_retried_when_the_server_is_down_and_sent_once(
    cast: Cast, mail_settings: SmtpServer
) -> None:
    _prefs(cast)
    _fail(cast)
    mail_settings.stop()
    [pk] = Delivery.objects.values_list("pk", flat=True)
    with pytest.raises(services.RetryLater):
        services.delivery_attempt(delivery_id=pk)
    delivery = Delivery.objects.get()
    assert (delivery.status, delivery.attempts) == ("pending", 1)
    assert "mail server" in delivery.last_error
    mail_settings.start()
    assert services.delivery_attempt(delivery_id=pk) == "sent"
    assert services.delivery_attempt(delivery_id=pk) == "skipped"
    tasks.notice_deliver.apply(args=[pk])
    assert len(mail_settings.messages()) == 1
    assert Delivery.objects.get().attempts == 2


@pytest.mark.django_db
def test_the_webhook_json_arrives_once_with_text(
    cast: Cast, webhook_receiver: WebhookReceiver
) -> None:
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    _fail(cast)  # the same key again: nothing new
    _deliver_all()
    _deliver_all()
    assert webhook_receiver.received == [
        {
            "text": "train-7 failed\nThe container exited with code 1 after 3 min.\n/workloads/7/",
            "event": "failed",
            "title": "train-7 failed",
        }
    ]
    assert webhook_receiver.headers[0]["Content-Type"] == "application/json"


@pytest.mark.django_db
def test_webhook_failures_are_retried_by_the_task_then_sent_once(
    cast: Cast, webhook_receiver: WebhookReceiver
) -> None:
    webhook_receiver.statuses = [503, 500, 429]
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    _deliver_all()  # eager: the task's retries run at once (the back-off base is 0 in tests)
    assert len(webhook_receiver.received) == 1
    assert webhook_receiver.statuses == []
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts) == ("sent", 4)
    assert delivery.last_error == ""  # cleared by the attempt that succeeded


@pytest.mark.django_db
def test_a_refused_webhook_is_given_up_not_retried(
    cast: Cast, webhook_receiver: WebhookReceiver
) -> None:
    webhook_receiver.statuses = [404]
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    _deliver_all()
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts) == ("failed", 1)
    assert "404" in delivery.last_error
    assert webhook_receiver.received == []


@pytest.mark.django_db
def test_attempts_stop_at_the_limit(
    cast: Cast, webhook_receiver: WebhookReceiver, settings: Any
) -> None:
    settings.NOTIFY_MAX_ATTEMPTS = 3
    webhook_receiver.statuses = [500] * 10
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    _deliver_all()
    delivery = Delivery.objects.get(channel="webhook")
    assert (delivery.status, delivery.attempts) == ("failed", 3)
    assert delivery.last_error.startswith("gave up")
    assert len(webhook_receiver.statuses) == 7


@pytest.mark.django_db
def test_a_webhook_url_that_now_points_inside_is_not_called(
    cast: Cast, webhook_receiver: WebhookReceiver, settings: Any
) -> None:
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK = False  # as in production
    _deliver_all()
    delivery = Delivery.objects.get(channel="webhook")
    assert delivery.status == "failed"
    assert "own machine" in delivery.last_error
    assert webhook_receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_send_once(cast: Cast, webhook_receiver: WebhookReceiver) -> None:
    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    [pk] = Delivery.objects.filter(channel="webhook").values_list("pk", flat=True)
    results: list[str] = []
    barrier = threading.Barrier(4)

    def worker() -> None:
        try:
            barrier.wait()
            results.append(services.delivery_attempt(delivery_id=pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(results) == ["sent", "skipped", "skipped", "skipped"]
    assert len(webhook_receiver.received) == 1


@pytest.mark.django_db
def test_the_sweep_gives_up_on_claims_left_by_a_dead_worker(
    cast: Cast, webhook_receiver: WebhookReceiver
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    _prefs(cast, url=webhook_receiver.url)
    _fail(cast)
    Delivery.objects.update(status="sending", claimed_at=timezone.now() - timedelta(hours=1))
    services.deliveries_sweep()
    delivery = Delivery.objects.get(channel="webhook")
    assert delivery.status == "failed"
    assert "never sent twice" in delivery.last_error
    _deliver_all()
    assert webhook_receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_delivers_what_notify_queued_on_commit(
    cast: Cast,
    webhook_receiver: WebhookReceiver,
    mail_settings: SmtpServer,
    redis_url: str,
) -> None:
    """The whole way: notify() in a transaction → on commit the task goes to Redis → a real
    Celery worker sends the e-mail and the webhook."""
    celery_app.conf.broker_url = redis_url
    try:
        with start_worker(celery_app, pool="solo", perform_ping_check=False, loglevel="WARNING"):
            _prefs(cast, url=webhook_receiver.url)
            _fail(cast)
            wait_for(lambda: webhook_receiver.received and mail_settings.messages(), timeout=30)
    finally:
        celery_app.conf.broker_url = "memory://"
    assert len(webhook_receiver.received) == 1
    assert len(mail_settings.messages()) == 1
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}
