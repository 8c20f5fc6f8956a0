"""What people are told about their quota requests: composed here, delivered by the
notifications app (``apps.notifications.services.notify``) when it is installed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module

from django.apps import apps as django_apps
from django.urls import reverse

from apps.accounts.models import Team, User
from apps.quotas.core import format_milli
from apps.quotas.models import QuotaGrant, QuotaRequest

log = logging.getLogger(__name__)

EVENT_DECIDED = "QUOTA_REQUEST_DECIDED"  # a member of NoticeEvent, by name


@dataclass(frozen=True)
class Notice:
    event: str
    users: tuple[User, ...]
    title: str
    body: str
    key: str
    link: str
    team: Team | None


def _link(pk: int) -> str:
    return reverse("quota-request-detail", args=[pk])


def decided_notice(request: QuotaRequest) -> Notice:
    amount = f"{format_milli(request.amount_milli)} GPU of {request.gpu_class.name}"
    period = f"{request.starts_at:%Y-%m-%d %H:%M} – {request.ends_at:%Y-%m-%d %H:%M} UTC"
    verdict = "approved" if request.state == QuotaRequest.State.APPROVED else "rejected"
    who = request.decided_by.get_username() if request.decided_by else "an admin"
    body = f"Your request for {amount} ({period}) in {request.team.name} was {verdict} by {who}."
    if request.decision_comment:
        body += f"\n\nComment: {request.decision_comment}"
    if verdict == "approved":
        body += "\n\nThe extra takes effect at the start and ends by itself at the end."
    return Notice(
        event=EVENT_DECIDED,
        users=(request.requested_by,),
        title=f"Quota request {verdict}: {amount}",
        body=body,
        key=f"quota-request-{request.pk}-decided",
        link=_link(request.pk),
        team=request.team,
    )


def ended_notice(grant: QuotaGrant) -> Notice:
    amount = f"{format_milli(grant.amount_milli)} GPU of {grant.gpu_class.name}"
    return Notice(
        event=EVENT_DECIDED,
        users=(grant.request.requested_by,),
        title=f"Quota grant ended: {amount}",
        body=(
            f"The extra {amount} granted to {grant.team.name} ended at "
            f"{grant.ends_at:%Y-%m-%d %H:%M} UTC. Work above the remaining quota keeps running "
            "on borrowed capacity: it may be preempted, with its grace period, when another "
            "team reclaims it."
        ),
        key=f"quota-grant-{grant.pk}-ended",
        link=_link(grant.request_id),
        team=grant.team,
    )


def deliver(notice: Notice) -> int:
    """Hand the notice to the notifications app; 0 when it is not installed."""
    if not django_apps.is_installed("apps.notifications"):
        log.info("notice %s not delivered: no notifications app", notice.key)
        return 0
    services = import_module("apps.notifications.services")
    core = import_module("apps.notifications.core")
    sent: int = services.notify(
        event=core.NoticeEvent[notice.event],
        users=list(notice.users),
        title=notice.title,
        body=notice.body,
        key=notice.key,
        link=notice.link,
        team=notice.team,
    )
    return sent


def quota_request_decided(request: QuotaRequest) -> Sequence[Notice]:
    notice = decided_notice(request)
    deliver(notice)
    return (notice,)


def quota_grant_ended(grant: QuotaGrant) -> Sequence[Notice]:
    notice = ended_notice(grant)
    deliver(notice)
    return (notice,)
