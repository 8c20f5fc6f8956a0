"""Attacks on webhook URLs: loopback and metadata addresses written the ways a resolver also
reads them (``127.1``, ``0177.0.0.1``, ``0x7f.0.0.1``, a trailing dot) were accepted when saved,
although delivery refused them; the user was told a hook was fine that would never fire. Saving
and delivery now apply one rule."""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from apps.notifications import core
from apps.notifications.services import notification_preferences_set
from tests.plugins.cast import Cast

INSIDE = [
    "https://127.1/hook",
    "https://0177.0.0.1/hook",
    "https://0x7f.0.0.1/hook",
    "https://0x7f000001/hook",
    "https://2130706433/hook",
    "https://127.0.0.1./hook",
    "https://localhost./hook",
    "https://LOCALHOST./hook",
    "https://app.localhost./hook",
    "https://[::1]./hook",
    "https://169.254.169.254./latest/meta-data",
    "https://0251.0376.0251.0376/latest/meta-data",
    "https://0xa9fea9fe/latest/meta-data",
    "https://10.1/hook",
    "https://0/hook",
    "https://metadata.google.internal./x",
    "https://intranet./x",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", INSIDE)
def test_webhook_url_a_resolver_reads_as_inside_is_refused_when_saved(
    cast: Cast, settings: Any, url: str
) -> None:
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK = False
    with pytest.raises(core.WebhookUrlError):
        notification_preferences_set(
            actor=cast.owner,
            email_events=[],
            webhook_events=["failed"],
            portal_events=[],
            webhook_url=url,
        )


@pytest.mark.parametrize("host", ["127.1", "0177.0.0.1", "0x7f.0.0.1", "2130706433", "10.1"])
def test_numeric_hosts_are_read_as_the_resolver_reads_them(host: str) -> None:
    resolved = {
        ipaddress.ip_address(info[4][0])
        for info in socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
    }
    assert resolved == {core.host_address(host)}


@pytest.mark.parametrize(
    "url",
    ["https://hooks.slack.com./services/T0/B0/X", "https://93.184.216.34./hook"],
)
def test_public_hosts_with_a_trailing_dot_are_still_accepted(url: str) -> None:
    assert core.webhook_url_check(url, allow_loopback=False) == url


@pytest.mark.parametrize("host", ["1.2.3.4.5", "08.0.0.1", "256.0.0.1", "1.2.65536"])
def test_numeric_hosts_no_resolver_reads_are_refused(host: str) -> None:
    with pytest.raises(core.WebhookUrlError):
        core.webhook_url_check(f"https://{host}/hook", allow_loopback=False)


def test_loopback_written_otherwise_is_still_loopback_in_development() -> None:
    assert core.webhook_url_check("http://127.1:8123/h", allow_loopback=True)
    with pytest.raises(core.WebhookUrlError):
        core.webhook_url_check("http://0xa.0.0.1/h", allow_loopback=True)
