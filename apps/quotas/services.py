from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, team_ids_of
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass
from apps.common import taskqueue
from apps.quotas import core, notices
from apps.quotas.models import QuotaGrant, QuotaRequest, TeamQuota
from apps.quotas.selectors import guarantee_warning_for_class, quota_request_may_decide, team_quota


@dataclass(frozen=True)
class QuotaResult:
    quota: TeamQuota
    warning: str | None


def team_quota_set(
    *,
    actor: User | None,
    team: Team,
    gpu_class: GpuClass,
    guaranteed_milli: int,
    limit_milli: int,
    per_user_cap_milli: int | None = None,
    source_ip: str | None = None,
) -> QuotaResult:
    """Create or change a team's quota for one GPU class.

    Returns the quota and, if the guarantees of all teams now exceed the class's known
    capacity, a warning to show the admin (the change is still saved: capacity may be
    about to grow, and the scheduler honours guarantees in order of fair share).
    """
    errors = core.quota_errors(
        guaranteed_milli=guaranteed_milli,
        limit_milli=limit_milli,
        per_user_cap_milli=per_user_cap_milli,
    )
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        quota, created = TeamQuota.objects.select_for_update().get_or_create(
            team=team,
            gpu_class=gpu_class,
            defaults={
                "guaranteed_milli": guaranteed_milli,
                "limit_milli": limit_milli,
                "per_user_cap_milli": per_user_cap_milli,
            },
        )
        before = {
            "guaranteed_milli": quota.guaranteed_milli,
            "limit_milli": quota.limit_milli,
            "per_user_cap_milli": quota.per_user_cap_milli,
        }
        if not created:
            quota.guaranteed_milli = guaranteed_milli
            quota.limit_milli = limit_milli
            quota.per_user_cap_milli = per_user_cap_milli
            quota.save()
        audit_record(
            actor=actor,
            action="quota.create" if created else "quota.update",
            obj=quota,
            source_ip=source_ip,
            details={
                "before": None if created else before,
                "after": {
                    "guaranteed_milli": guaranteed_milli,
                    "limit_milli": limit_milli,
                    "per_user_cap_milli": per_user_cap_milli,
                },
            },
        )
        warning = guarantee_warning_for_class(gpu_class)
        # Kubernetes enforces the limit a second time: refresh the ResourceQuota.
        taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(team.pk)
    return QuotaResult(quota=quota, warning=warning)


def team_quota_delete(
    *, actor: User | None, quota: TeamQuota, source_ip: str | None = None
) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action="quota.delete", obj=quota, source_ip=source_ip)
        team_id = quota.team_id
        quota.delete()
        taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(team_id)


# --- quota requests and grants ----------------------------------------------------------------


def quota_request_submit(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    kind: str,
    amount_milli: int,
    starts_at: datetime,
    ends_at: datetime,
    justification: str,
    source_ip: str | None = None,
    now: datetime | None = None,
) -> QuotaRequest:
    """A member or lead of ``team`` asks for more of a class for a period.

    Raises PermissionDenied for someone outside the team and ValidationError (per field) for a
    request that cannot be made as asked."""
    now = now or timezone.now()
    if not platform_may(actor, Act.ACT_FOR_TEAMS) and team.pk not in team_ids_of(actor):
        raise PermissionDenied("Only members of the team may ask for more of its quota.")
    base = team_quota(team, gpu_class)
    errors = core.grant_request_errors(
        kind=kind,
        amount_milli=amount_milli,
        start=starts_at,
        end=ends_at,
        now=now,
        justification=justification,
        max_days=settings.QUOTA_GRANT_MAX_DAYS,
        base=None
        if base is None
        else core.QuotaNumbers(base.guaranteed_milli, base.limit_milli, base.per_user_cap_milli),
    )
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        request = QuotaRequest.objects.create(
            team=team,
            gpu_class=gpu_class,
            requested_by=actor,
            kind=kind,
            amount_milli=amount_milli,
            starts_at=max(starts_at, now),
            ends_at=ends_at,
            justification=justification.strip(),
        )
        audit_record(
            actor=actor,
            action="quota_request.create",
            obj=request,
            source_ip=source_ip,
            details={
                "kind": kind,
                "amount_milli": amount_milli,
                "starts_at": request.starts_at.isoformat(),
                "ends_at": ends_at.isoformat(),
            },
        )
    return request


def quota_request_decide(
    *,
    actor: User,
    request: QuotaRequest,
    approve: bool,
    comment: str = "",
    source_ip: str | None = None,
    now: datetime | None = None,
) -> QuotaRequest:
    """Approve (a grant from its start to its end) or reject a pending request, with a comment.

    Leads decide per-user caps of their team, platform admins team quotas. Audited; the person
    who asked is told."""
    now = now or timezone.now()
    if not quota_request_may_decide(actor, request):
        raise PermissionDenied(
            "Platform admins decide team quotas."
            if request.kind == core.KIND_TEAM
            else "Only the team's leads and platform admins decide per-user caps."
        )
    if len(comment) > 2000:
        raise ValidationError({"comment": "At most 2000 characters."})
    with transaction.atomic():
        # The race it prevents: two deciders (or a double click) approving the same request
        # twice and granting it twice. The row lock makes the second one see it decided.
        locked = QuotaRequest.objects.select_for_update().get(pk=request.pk)
        if locked.state != QuotaRequest.State.PENDING:
            raise ValidationError({"state": f"This request is already {locked.state}."})
        if approve and locked.ends_at <= now:
            raise ValidationError(
                {"state": "Its period is over: reject it, or ask again for a new period."}
            )
        if approve and locked.kind == core.KIND_USER:
            base = team_quota(locked.team, locked.gpu_class)
            errors = core.grant_request_errors(
                kind=locked.kind,
                amount_milli=locked.amount_milli,
                start=locked.starts_at,
                end=locked.ends_at,
                now=now,
                justification=locked.justification,
                max_days=settings.QUOTA_GRANT_MAX_DAYS,
                base=None
                if base is None
                else core.QuotaNumbers(
                    base.guaranteed_milli, base.limit_milli, base.per_user_cap_milli
                ),
            )
            if errors:
                raise ValidationError({"state": " ".join(errors.values())})
        locked.state = QuotaRequest.State.APPROVED if approve else QuotaRequest.State.REJECTED
        locked.decided_by = actor
        locked.decided_at = now
        locked.decision_comment = comment.strip()
        locked.save(update_fields=["state", "decided_by", "decided_at", "decision_comment"])
        if approve:
            grant = QuotaGrant.objects.create(
                request=locked,
                team=locked.team,
                gpu_class=locked.gpu_class,
                user=locked.requested_by if locked.kind == core.KIND_USER else None,
                amount_milli=locked.amount_milli,
                starts_at=max(locked.starts_at, now),
                ends_at=locked.ends_at,
            )
            if grant.starts_at <= now:
                _grant_started(grant)
        audit_record(
            actor=actor,
            action="quota_request.approve" if approve else "quota_request.reject",
            obj=locked,
            source_ip=source_ip,
            details={"comment": locked.decision_comment},
        )
        notices.quota_request_decided(locked)
    return locked


def quota_request_cancel(
    *, actor: User, request: QuotaRequest, source_ip: str | None = None
) -> QuotaRequest:
    """Withdraw a pending request: the person who asked, or a lead of the team."""
    if request.requested_by_id != actor.pk and not is_team_lead(actor, request.team_id):
        raise PermissionDenied("Only the person who asked or a lead of the team may withdraw it.")
    with transaction.atomic():
        changed = QuotaRequest.objects.filter(
            pk=request.pk, state=QuotaRequest.State.PENDING
        ).update(state=QuotaRequest.State.CANCELLED)
        if not changed:
            raise ValidationError({"state": "Only a pending request can be withdrawn."})
        request.refresh_from_db()
        audit_record(actor=actor, action="quota_request.cancel", obj=request, source_ip=source_ip)
    return request


def _grant_started(grant: QuotaGrant) -> None:
    QuotaGrant.objects.filter(pk=grant.pk).update(started_noted=True)
    audit_record(actor=None, action="quota_grant.start", obj=grant)
    # Kubernetes enforces the team's limit a second time: refresh its ResourceQuota.
    taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(grant.team_id)
    taskqueue.SCHEDULING_CYCLE.on_commit()


def quota_grant_boundaries_apply(*, now: datetime | None = None) -> tuple[int, int]:
    """Act on the grants that started or ended since the last pass: refresh the team's cluster
    quota, audit it and, at the end, tell the person who asked (what runs above the remaining
    quota is borrowed from then on). Each start and end is acted on once.

    The scheduler needs none of this: it reads the grants in effect at each cycle's time."""
    now = now or timezone.now()
    started = ended = 0
    with transaction.atomic():
        for grant in QuotaGrant.objects.filter(
            started_noted=False, starts_at__lte=now
        ).select_related("team", "gpu_class", "user"):
            # Claimed by a conditional update: two workers never act on one start twice.
            if QuotaGrant.objects.filter(pk=grant.pk, started_noted=False).update(
                started_noted=True
            ):
                audit_record(actor=None, action="quota_grant.start", obj=grant)
                taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(grant.team_id)
                started += 1
        for grant in QuotaGrant.objects.filter(ended_noted=False, ends_at__lte=now).select_related(
            "team", "gpu_class", "user", "request__requested_by"
        ):
            if QuotaGrant.objects.filter(pk=grant.pk, ended_noted=False).update(
                ended_noted=True, started_noted=True
            ):
                audit_record(actor=None, action="quota_grant.end", obj=grant)
                taskqueue.TEAM_NAMESPACE_ENSURE.on_commit(grant.team_id)
                notices.quota_grant_ended(grant)
                ended += 1
        if started or ended:
            taskqueue.SCHEDULING_CYCLE.on_commit()
    return started, ended
