"""The pure rules of notifications, on plain data."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.notifications import core
from apps.notifications.core import Channel, NoticeEvent


def test_event_names_are_the_agreed_ones() -> None:
    assert {e.name for e in NoticeEvent} == {
        "ADMITTED",
        "RUNNING",
        "FINISHED",
        "FAILED",
        "PREEMPTED",
        "IDLE_WARNING",
        "SUSPENDED",
        "QUOTA_REQUEST_DECIDED",
        "RESERVATION_DECIDED",
        "BUDGET_THRESHOLD",
        "NODE_DRAIN",
        "ENDPOINT_EVENT",
    }
    assert set(core.EVENT_LABELS) == set(NoticeEvent)


def test_defaults_show_what_needs_attention_in_the_portal_and_mail_only_what_needs_action() -> None:
    prefs = core.default_preferences(email_address="a@example.com")
    # The routine running goes to the daily digest, not the portal's list.
    assert core.channels_for(prefs, NoticeEvent.RUNNING) == {Channel.DIGEST}
    assert core.channels_for(prefs, NoticeEvent.FAILED) == {Channel.PORTAL, Channel.EMAIL}


def test_a_channel_without_an_address_is_not_used() -> None:
    prefs = core.Preferences(
        events={c: frozenset(NoticeEvent) for c in Channel}, email_address="", webhook_url=""
    )
    assert core.channels_for(prefs, NoticeEvent.FAILED) == {Channel.PORTAL}


@settings(deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(list(Channel)), st.frozensets(st.sampled_from(list(NoticeEvent)))
    ),
    st.sampled_from(list(NoticeEvent)),
)
def test_an_event_reaches_exactly_the_channels_chosen_for_it(
    events: dict[Channel, frozenset[NoticeEvent]], event: NoticeEvent
) -> None:
    prefs = core.Preferences(
        events=events, email_address="a@example.com", webhook_url="https://h.example.com/x"
    )
    assert core.channels_for(prefs, event) == {c for c, chosen in events.items() if event in chosen}


def test_unknown_event_names_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        core.parse_events(["failed", "nope"])


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "https://example.webhook.office.com/webhookb2/abc",
        "https://93.184.216.34/hook",
    ],
)
def test_public_https_webhooks_are_accepted(url: str) -> None:
    assert core.webhook_url_check(url, allow_loopback=False) == url


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.slack.com/x", "https"),
        ("ftp://example.com/x", "https"),
        ("https://127.0.0.1/x", "own machine"),
        ("https://localhost:8000/x", "own machine"),
        ("https://[::1]/x", "own machine"),
        ("https://10.0.0.5/x", "private"),
        ("https://192.168.1.1/x", "private"),
        ("https://169.254.169.254/latest/meta-data", "private"),
        ("https://[fd00::1]/x", "private"),
        ("https://[::ffff:10.0.0.1]/x", "private"),
        ("https://0.0.0.0/x", "private"),
        ("https://metadata.google.internal/x", "public host name"),
        ("https://intranet/x", "public host name"),
        ("https://user:pw@example.com/x", "user name"),
        ("https://example.com:22/x", "port"),
        ("https://example.com/a b", "spaces"),
        ("https://example.com/\u202ex", "control"),
        ("https://" + "a" * 600 + ".com/", "longer"),
        ("not-a-url", "https"),
        ("https://[::1/x", "cannot be read"),
    ],
)
def test_webhooks_inside_the_network_or_in_clear_text_are_refused(url: str, why: str) -> None:
    with pytest.raises(core.WebhookUrlError, match=why):
        core.webhook_url_check(url, allow_loopback=False)


def test_loopback_webhooks_only_when_allowed() -> None:
    url = "http://127.0.0.1:8123/hook"
    assert core.webhook_url_check(url, allow_loopback=True) == url
    with pytest.raises(core.WebhookUrlError):
        core.webhook_url_check(url, allow_loopback=False)
    # Allowing loopback admits nothing else that is private.
    with pytest.raises(core.WebhookUrlError):
        core.webhook_url_check("http://10.1.2.3/hook", allow_loopback=True)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("10.0.0.1", False),
        ("172.16.0.1", False),
        ("100.64.0.1", False),  # carrier-grade NAT
        ("169.254.169.254", False),
        ("127.0.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("224.0.0.1", False),
        ("fe80::1", False),
    ],
)
def test_resolved_addresses_must_be_public(address: str, allowed: bool) -> None:
    assert core.address_allowed(ipaddress.ip_address(address), allow_loopback=False) is allowed


def test_webhook_payload_has_text_that_slack_and_teams_show() -> None:
    payload = core.webhook_payload(
        event=NoticeEvent.FAILED, title="train-1 failed", body="Exit code 1.", link="https://p/w/1"
    )
    assert payload["text"] == "train-1 failed\nExit code 1.\nhttps://p/w/1"
    assert json.loads(json.dumps(payload))["event"] == "failed"


def test_email_escapes_what_users_named() -> None:
    message = core.email_message(
        event=NoticeEvent.FAILED,
        title='<script>alert("x")</script> failed',
        body="line one\n\nline <b>two</b>",
        link="https://portal/w/1?a=1&b=2",
        site_name="gpupaas",
        prefs_url="https://portal/notifications/preferences/",
    )
    assert message.subject == '[gpupaas] <script>alert("x")</script> failed'
    assert "<script>" not in message.html
    assert "&lt;b&gt;two&lt;/b&gt;" in message.html
    assert 'href="https://portal/w/1?a=1&amp;b=2"' in message.html
    assert "Open: https://portal/w/1?a=1&b=2" in message.text


@settings(deadline=None)
@given(st.integers(min_value=1, max_value=60))
def test_retry_delays_grow_and_stay_capped(attempts: int) -> None:
    delay = core.retry_delay_seconds(attempts, base=30, cap=3600)
    assert 30 <= delay <= 3600
    assert core.retry_delay_seconds(attempts + 1, base=30, cap=3600) >= delay
