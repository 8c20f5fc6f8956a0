"""What a notice is and where it goes, decided on plain data.

Events are named by :class:`NoticeEvent`; each user's preferences say, per channel (e-mail,
webhook, the portal's notice list), which events reach them. The webhook body is one JSON
object with ``text``, which both Slack's and Microsoft Teams' incoming webhooks accept.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from urllib.parse import urlsplit


class NoticeEvent(StrEnum):
    ADMITTED = "admitted"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    PREEMPTED = "preempted"
    IDLE_WARNING = "idle_warning"
    SUSPENDED = "suspended"
    QUOTA_REQUEST_DECIDED = "quota_request_decided"
    RESERVATION_DECIDED = "reservation_decided"
    BUDGET_THRESHOLD = "budget_threshold"
    NODE_DRAIN = "node_drain"
    ENDPOINT_EVENT = "endpoint_event"


EVENT_LABELS: dict[NoticeEvent, str] = {
    NoticeEvent.ADMITTED: "Workload admitted",
    NoticeEvent.RUNNING: "Workload running",
    NoticeEvent.FINISHED: "Workload finished",
    NoticeEvent.FAILED: "Workload failed",
    NoticeEvent.PREEMPTED: "Workload preempted",
    NoticeEvent.IDLE_WARNING: "About to be suspended for idleness",
    NoticeEvent.SUSPENDED: "Workload suspended",
    NoticeEvent.QUOTA_REQUEST_DECIDED: "Quota request decided",
    NoticeEvent.RESERVATION_DECIDED: "Reservation decided",
    NoticeEvent.BUDGET_THRESHOLD: "Budget threshold reached",
    NoticeEvent.NODE_DRAIN: "Node drained",
    NoticeEvent.ENDPOINT_EVENT: "Inference endpoint event",
}


# What a workload does in the normal course of things: worth a line in a daily digest, not a
# notice each (one lead got 23 in 15 minutes). Everything else needs someone's attention.
ROUTINE_EVENTS = frozenset({NoticeEvent.ADMITTED, NoticeEvent.RUNNING, NoticeEvent.FINISHED})
ATTENTION_EVENTS = frozenset(NoticeEvent) - ROUTINE_EVENTS


class Channel(StrEnum):
    EMAIL = "email"
    WEBHOOK = "webhook"
    PORTAL = "portal"
    DIGEST = "digest"  # one e-mail a day, grouped per workload


CHANNEL_LABELS: dict[Channel, str] = {
    Channel.EMAIL: "E-mail",
    Channel.WEBHOOK: "Webhook",
    Channel.PORTAL: "Portal",
    Channel.DIGEST: "Daily e-mail digest",
}
# Channels with a delivery per notice (the portal shows the notice itself; the digest is sent
# once a day for all of them).
DELIVERED_CHANNELS = (Channel.EMAIL, Channel.WEBHOOK)

# Until a user chooses: in the portal what needs attention (failures, preemptions, idle
# warnings, decisions, budget thresholds …); the routine admitted, running and finished in the
# daily digest; by e-mail only what needs action or ends work unexpectedly; nothing by webhook
# (there is no URL yet).
DEFAULT_EVENTS: dict[Channel, frozenset[NoticeEvent]] = {
    Channel.PORTAL: ATTENTION_EVENTS,
    Channel.DIGEST: ROUTINE_EVENTS,
    Channel.EMAIL: frozenset(
        {
            NoticeEvent.FAILED,
            NoticeEvent.PREEMPTED,
            NoticeEvent.IDLE_WARNING,
            NoticeEvent.SUSPENDED,
            NoticeEvent.QUOTA_REQUEST_DECIDED,
            NoticeEvent.RESERVATION_DECIDED,
            NoticeEvent.BUDGET_THRESHOLD,
        }
    ),
    Channel.WEBHOOK: frozenset(),
}

TITLE_MAX_LENGTH = 200
BODY_MAX_LENGTH = 4000
KEY_MAX_LENGTH = 200
LINK_MAX_LENGTH = 500
WEBHOOK_URL_MAX_LENGTH = 500


@dataclass(frozen=True)
class Preferences:
    """One user's choices: the events each channel carries, and the webhook's URL."""

    events: Mapping[Channel, frozenset[NoticeEvent]]
    email_address: str = ""
    webhook_url: str = ""


def default_preferences(*, email_address: str = "") -> Preferences:
    return Preferences(events=dict(DEFAULT_EVENTS), email_address=email_address)


def channels_for(prefs: Preferences, event: NoticeEvent) -> frozenset[Channel]:
    """The channels an event reaches: chosen for the event, and with somewhere to go."""
    chosen = {channel for channel, events in prefs.events.items() if event in events}
    if not prefs.email_address:
        chosen.discard(Channel.EMAIL)
        chosen.discard(Channel.DIGEST)
    if not prefs.webhook_url:
        chosen.discard(Channel.WEBHOOK)
    return frozenset(chosen)


def parse_events(values: Iterable[str]) -> frozenset[NoticeEvent]:
    """Known event names only; an unknown one raises ``ValueError`` naming it."""
    events = set()
    for value in values:
        try:
            events.add(NoticeEvent(value))
        except ValueError:
            raise ValueError(f"Unknown event {value!r}.") from None
    return frozenset(events)


# --- webhook URLs --------------------------------------------------------------------------------


class WebhookUrlError(ValueError):
    """A webhook URL the platform will not call; the message says why."""


def webhook_url_check(url: str, *, allow_loopback: bool) -> str:
    """The URL, stripped, if the platform may call it; else :class:`WebhookUrlError`.

    Only ``https`` with a host name or a public address. ``allow_loopback`` (development and
    tests) also admits ``http`` and ``https`` to 127.0.0.0/8, ::1 and ``localhost``. Names are
    checked again against the addresses they resolve to when the hook is called
    (:func:`address_allowed`), since a public-looking name may point inside.
    """
    url = url.strip()
    if len(url) > WEBHOOK_URL_MAX_LENGTH:
        raise WebhookUrlError(f"The URL is longer than {WEBHOOK_URL_MAX_LENGTH} characters.")
    if any(ch.isspace() or unicodedata.category(ch) in {"Cc", "Cf"} for ch in url):
        raise WebhookUrlError("The URL contains spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookUrlError(f"The URL cannot be read: {exc}.") from None
    host = (parts.hostname or "").lower()
    if parts.scheme not in {"https", "http"} or not host:
        raise WebhookUrlError("Use an https:// URL with a host name.")
    if parts.username is not None or parts.password is not None:
        raise WebhookUrlError("The URL must not carry a user name or password.")
    loopback = _is_loopback_host(host)
    if loopback:
        if not allow_loopback:
            raise WebhookUrlError("Webhooks cannot point at this server's own machine.")
        return url
    if parts.scheme != "https":
        raise WebhookUrlError("Use an https:// URL; plain http is not sent.")
    literal = _ip_literal(host)
    if literal is not None and not address_allowed(literal, allow_loopback=False):
        raise WebhookUrlError("Webhooks cannot point at private, local or reserved addresses.")
    name = host.removesuffix(".")  # "intranet." is the name "intranet", rooted
    if literal is None and (
        name.endswith((".local", ".internal", ".localhost")) or "." not in name
    ):
        raise WebhookUrlError("Use a public host name (internal names are not called).")
    if port is not None and port not in {443, 8443}:
        raise WebhookUrlError("Use the standard https port (443 or 8443).")
    return url


_NUMBER_PART = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")


def _inet_aton(name: str) -> ipaddress.IPv4Address | None:
    """``name`` read as the C library's inet_aton reads it, which is what the resolver does with
    a numeric host before any DNS lookup: one to four parts, each decimal, octal (a leading 0)
    or hex (0x); the last part fills the bytes left (``127.1`` is 127.0.0.1, ``0x7f000001``
    too). None when it is not numeric at all; WebhookUrlError when it looks numeric but no
    resolver reads it (``08.0.0.1``, ``256.0.0.1``)."""
    parts = name.split(".")
    if not all(_NUMBER_PART.fullmatch(p) for p in parts):
        return None
    problem = WebhookUrlError(f"{name} is neither a host name nor an address.")
    if len(parts) > 4:
        raise problem
    numbers = []
    for part in parts:
        if part[:2].lower() == "0x":
            numbers.append(int(part[2:] or "0", 16))
        elif len(part) > 1 and part.startswith("0"):
            if not set(part) <= set("01234567"):
                raise problem
            numbers.append(int(part, 8))
        else:
            numbers.append(int(part))
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (4 - len(leading)):
        raise problem
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a URL's host names by itself, as the resolver reads it (a trailing dot,
    ``[v6]`` brackets and inet_aton's short, octal and hex forms included); None for a name
    only DNS can answer."""
    name = host.strip("[]").removesuffix(".")
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return _inet_aton(name)


def _ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    return host_address(host)


def _is_loopback_host(host: str) -> bool:
    name = host.removesuffix(".")
    if name == "localhost":
        return True
    literal = _ip_literal(host)
    return literal is not None and literal.is_loopback


def address_allowed(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, *, allow_loopback: bool
) -> bool:
    """Whether a resolved address may be called: public unicast only (loopback if allowed)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return allow_loopback
    return address.is_global and not (address.is_multicast or address.is_reserved)


# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    subject: str
    text: str
    html: str


def _escape(value: str) -> str:
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#x27;")
    )


def email_message(
    *, event: NoticeEvent, title: str, body: str, link: str, site_name: str, prefs_url: str
) -> Message:
    """The e-mail for one notice: subject, plain text and a small HTML part."""
    subject = f"[{site_name}] {title}"
    lines = [title, "", body]
    if link:
        lines += ["", f"Open: {link}"]
    lines += ["", "--", f"{EVENT_LABELS[event]}. Choose what you hear about: {prefs_url}"]
    paragraphs = "".join(f"<p>{_escape(p)}</p>" for p in body.splitlines() if p.strip())
    button = (
        f'<p><a href="{_escape(link)}" style="display:inline-block;padding:8px 14px;'
        f'background:#1f4e99;color:#fff;text-decoration:none;border-radius:4px">Open</a></p>'
        if link
        else ""
    )
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_escape(subject)}</title></head>"
        '<body style="font-family:system-ui,sans-serif;max-width:600px;margin:24px auto;'
        'color:#1b1b1b">'
        f'<p style="color:#555;font-size:13px">{_escape(site_name)} · '
        f"{_escape(EVENT_LABELS[event])}</p>"
        f'<h1 style="font-size:20px">{_escape(title)}</h1>{paragraphs}{button}'
        '<hr style="border:none;border-top:1px solid #ddd">'
        f'<p style="color:#555;font-size:12px"><a href="{_escape(prefs_url)}">'
        "Choose what you hear about</a></p></body></html>"
    )
    return Message(subject=subject, text="\n".join(lines), html=html)


def webhook_payload(*, event: NoticeEvent, title: str, body: str, link: str) -> dict[str, str]:
    """The webhook's JSON body: ``text`` is what Slack and Teams incoming webhooks show."""
    text = f"{title}\n{body}"
    if link:
        text += f"\n{link}"
    return {"text": text, "event": event.value, "title": title}


# --- delivery -----------------------------------------------------------------------------------


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # claimed by one worker; never claimed again
    SENT = "sent"
    FAILED = "failed"  # given up; last_error says why


def retry_delay_seconds(attempts: int, *, base: int = 30, cap: int = 3600) -> int:
    """Seconds before the next attempt after ``attempts`` failures: doubling, capped."""
    return int(min(cap, base * 2 ** max(0, attempts - 1)))


# --- the daily digest ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DigestItem:
    """One notice as the digest reads it."""

    event: NoticeEvent
    title: str
    link: str
    at: datetime


@dataclass(frozen=True)
class DigestGroup:
    """What happened to one workload (notices with the same link), in order."""

    link: str
    items: tuple[DigestItem, ...]

    @property
    def headline(self) -> str:
        return self.items[-1].title


def digest_groups(items: Iterable[DigestItem]) -> list[DigestGroup]:
    """Notices grouped per workload (their link; a notice without one is its own group),
    groups in the order of their first notice, each group's notices oldest first."""
    groups: dict[str, list[DigestItem]] = {}
    for n, item in enumerate(sorted(items, key=lambda i: i.at)):
        groups.setdefault(item.link or f"#{n}", []).append(item)
    return [
        DigestGroup(link if not link.startswith("#") else "", tuple(found))
        for link, found in groups.items()
    ]


def digest_message(
    *,
    groups: Sequence[DigestGroup],
    day: str,
    site_name: str,
    prefs_url: str,
    absolute: Callable[[str], str],
) -> Message:
    """The daily digest: one e-mail, one paragraph per workload."""
    count = sum(len(g.items) for g in groups)
    subject = f"[{site_name}] {day}: {count} updates on {len(groups)} workloads"
    lines = [f"What happened to your workloads on {day}:", ""]
    blocks = []
    for g in groups:
        steps = ", ".join(
            f"{EVENT_LABELS[i.event].split()[-1].lower()} {i.at:%H:%M}" for i in g.items
        )
        lines.append(f"- {g.headline} ({steps})")
        link = absolute(g.link) if g.link else ""
        if link:
            lines.append(f"  {link}")
        title = _escape(g.headline)
        blocks.append(
            f'<li><a href="{_escape(link)}">{title}</a> · {_escape(steps)}</li>'
            if link
            else f"<li>{title} · {_escape(steps)}</li>"
        )
    lines += ["", "--", f"Daily digest (times in UTC). Choose what you hear about: {prefs_url}"]
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_escape(subject)}</title></head>"
        '<body style="font-family:system-ui,sans-serif;max-width:600px;margin:24px auto">'
        f"<p>What happened to your workloads on {_escape(day)}:</p><ul>{''.join(blocks)}</ul>"
        f'<p style="color:#555;font-size:13px">Daily digest (times in UTC). '
        f'<a href="{_escape(prefs_url)}">Choose what you hear about</a>.</p></body></html>'
    )
    return Message(subject=subject, text="\n".join(lines), html=html)
