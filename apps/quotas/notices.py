"""What people are told about their quota requests: composed here, delivered through the
notifications app (once per person and key, after the transaction commits)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC

from django.urls import reverse

from apps.accounts.models import Team, User
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.quotas.core import format_milli
from apps.quotas.models import QuotaGrant, QuotaRequest

EVENT_DECIDED = NoticeEvent.QUOTA_REQUEST_DECIDED


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
    start, end = request.starts_at.astimezone(UTC), request.ends_at.astimezone(UTC)
    period = f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"
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
            f"{grant.ends_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC. Work above the remaining "
            "quota keeps running on borrowed capacity: it may be preempted, with its grace "
            "period, when another team reclaims it."
        ),
        key=f"quota-grant-{grant.pk}-ended",
        link=_link(grant.request_id),
        team=grant.team,
    )


def deliver(notice: Notice) -> int:
    return notify(
        event=notice.event,
        users=notice.users,
        title=notice.title,
        body=notice.body,
        key=notice.key,
        link=notice.link,
        team=notice.team,
    )


def quota_request_decided(request: QuotaRequest) -> Sequence[Notice]:
    notice = decided_notice(request)
    deliver(notice)
    return (notice,)


def quota_grant_ended(grant: QuotaGrant) -> Sequence[Notice]:
    notice = ended_notice(grant)
    deliver(notice)
    return (notice,)
