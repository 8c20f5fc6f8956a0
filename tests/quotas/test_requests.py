"""Quota requests from ask to expiry, on the database: who may ask and decide, the grant in
effect for the scheduler and the rule set, expiry by itself, audit and the notice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from apps.audit.models import AuditEvent
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice
from apps.quotas import notices
from apps.quotas.models import QuotaGrant, QuotaRequest
from apps.quotas.services import (
    quota_grant_boundaries_apply,
    quota_request_cancel,
    quota_request_decide,
    quota_request_submit,
)
from apps.reservations.selectors import effective_quota, quota_request_capacity_note
from apps.scheduling.core import schedule
from apps.scheduling.governance import effective_quotas
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads.selectors import request_context
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


def ask(cast: Cast, **kw: object) -> QuotaRequest:
    now = timezone.now()
    args: dict[str, object] = {
        "actor": cast.owner,
        "team": cast.team,
        "gpu_class": cast.gpu_class,
        "kind": QuotaRequest.Kind.TEAM,
        "amount_milli": 16000,
        "starts_at": now + DAY,
        "ends_at": now + 15 * DAY,
        "justification": "Paper deadline: two weeks of sweeps.",
    }
    args.update(kw)
    return quota_request_submit(**args)  # type: ignore[arg-type]


def test_team_request_from_ask_to_expiry(cast: Cast) -> None:
    request = ask(cast)
    assert request.state == QuotaRequest.State.PENDING
    with pytest.raises(PermissionDenied, match="Platform admins decide team quotas"):
        quota_request_decide(actor=cast.lead, request=request, approve=True)
    decided = quota_request_decide(
        actor=cast.admin, request=request, approve=True, comment="Go for it."
    )
    assert decided.state == QuotaRequest.State.APPROVED and decided.decided_by == cast.admin
    grant = QuotaGrant.objects.get(request=request)
    start, end = grant.starts_at, grant.ends_at

    def quota_at(t: object) -> tuple[int, int]:
        q = effective_quota(cast.team, cast.gpu_class, user=cast.owner, now=t)  # type: ignore[arg-type]
        assert q is not None
        return q.guaranteed_milli, q.limit_milli

    assert quota_at(start - timedelta(seconds=1)) == (4000, 8000)
    assert quota_at(start) == (20000, 24000)
    assert quota_at(end - timedelta(seconds=1)) == (20000, 24000)
    assert quota_at(end) == (4000, 8000)  # expired by itself
    # The scheduler's snapshot carries the grant; its cycle applies it only within the period.
    for t, limit in [(start + DAY, 24000), (end + DAY, 8000)]:
        snap = scheduling_snapshot(now=t, half_life_seconds=3600)
        assert [g.amount_milli for g in snap.grants] == ([16000] if t < end else [])
        quotas = effective_quotas(snap.quotas, snap.grants, snap.reservations, t)
        assert quotas[(cast.team.name, cast.gpu_class.name)].limit_milli == limit
    # Acting on the boundaries is audited once each.
    assert quota_grant_boundaries_apply(now=start) == (1, 0)
    assert quota_grant_boundaries_apply(now=start) == (0, 0)
    assert quota_grant_boundaries_apply(now=end) == (0, 1)
    assert quota_grant_boundaries_apply(now=end + DAY) == (0, 0)
    actions = list(
        AuditEvent.objects.filter(action__startswith="quota_")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == [
        "quota_request.create",
        "quota_request.approve",
        "quota_grant.start",
        "quota_grant.end",
    ]
    approve = AuditEvent.objects.get(action="quota_request.approve")
    assert approve.details["comment"] == "Go for it."


def test_the_decision_notice_names_the_amount_period_and_comment(cast: Cast) -> None:
    request = quota_request_decide(
        actor=cast.admin, request=ask(cast), approve=False, comment="Not this month."
    )
    notice = notices.decided_notice(request)
    assert notice.event == NoticeEvent.QUOTA_REQUEST_DECIDED and notice.users == (cast.owner,)
    assert notice.title == "Quota request rejected: 16 GPU of H100-80GB"
    assert "Not this month." in notice.body and "by admin" in notice.body
    assert notice.key == f"quota-request-{request.pk}-decided"
    assert notice.link == f"/quota-requests/{request.pk}/"
    # Delivered once, through the notifications app, to the person who asked only.
    (told,) = Notice.objects.filter(key=notice.key)
    assert told.user == cast.owner and told.title == notice.title


def test_a_grant_reaches_the_rule_set_of_every_door(cast: Cast) -> None:
    before = request_context(
        actor=cast.owner, team=cast.team, gpu_class=cast.gpu_class, image=cast.image
    )
    assert before.quota is not None and before.quota.limit_milli == 8000
    request = ask(cast, starts_at=timezone.now(), ends_at=timezone.now() + DAY)
    quota_request_decide(actor=cast.admin, request=request, approve=True)
    after = request_context(
        actor=cast.owner, team=cast.team, gpu_class=cast.gpu_class, image=cast.image
    )
    assert after.quota is not None and after.quota.limit_milli == 24000


def test_leads_decide_a_members_cap_within_the_team_quota(cast: Cast) -> None:
    quota = cast.team.quotas.get()
    quota.per_user_cap_milli = 2000
    quota.save()
    with pytest.raises(ValidationError) as info:
        ask(cast, kind=QuotaRequest.Kind.USER, amount_milli=7000)
    assert "exceed the team's limit of 8 GPU" in str(info.value)
    request = ask(cast, kind=QuotaRequest.Kind.USER, amount_milli=2000, starts_at=timezone.now())
    with pytest.raises(PermissionDenied):
        quota_request_decide(actor=cast.teammate, request=request, approve=True)
    quota_request_decide(actor=cast.lead, request=request, approve=True)
    now = timezone.now()
    mine = effective_quota(cast.team, cast.gpu_class, user=cast.owner, now=now)
    theirs = effective_quota(cast.team, cast.gpu_class, user=cast.teammate, now=now)
    assert mine is not None and mine.per_user_cap_milli == 4000 and mine.limit_milli == 8000
    assert theirs is not None and theirs.per_user_cap_milli == 2000
    snap = scheduling_snapshot(now=now, half_life_seconds=3600)
    assert [(g.user, g.amount_milli) for g in snap.grants] == [("owner", 2000)]
    schedule(snap)  # the cycle takes the grant as plain data


def test_outsiders_cannot_ask_and_decided_requests_are_not_decided_again(cast: Cast) -> None:
    with pytest.raises(PermissionDenied):
        ask(cast, actor=cast.outsider)
    request = ask(cast)
    quota_request_decide(actor=cast.admin, request=request, approve=False)
    with pytest.raises(ValidationError, match="already rejected"):
        quota_request_decide(actor=cast.admin, request=request, approve=True)
    with pytest.raises(ValidationError, match="Only a pending request"):
        quota_request_cancel(actor=cast.owner, request=request)
    assert not QuotaGrant.objects.exists()


def test_bad_requests_get_a_message_per_field(cast: Cast) -> None:
    now = timezone.now()
    with pytest.raises(ValidationError) as info:
        ask(cast, amount_milli=0, starts_at=now, ends_at=now - DAY, justification="")
    assert set(info.value.message_dict) == {"amount", "ends_at", "justification"}


def test_a_request_above_free_capacity_says_so_before_approval(cast: Cast) -> None:
    # 32 GPUs, 8 guaranteed: 24 free.
    fits = ask(cast, amount_milli=24000)
    assert quota_request_capacity_note(fits) is None
    too_much = ask(cast, amount_milli=25000)
    note = quota_request_capacity_note(too_much)
    assert note is not None and "only 24 GPU of H100-80GB is free" in note
    quota_request_decide(actor=cast.admin, request=fits, approve=True)
    note = quota_request_capacity_note(QuotaRequest.objects.get(pk=too_much.pk))
    assert note is not None and "only 0 GPU" in note
    # An approved request is not counted against itself.
    assert quota_request_capacity_note(QuotaRequest.objects.get(pk=fits.pk)) is None
