from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass, Image
from apps.policies import core
from apps.policies.models import TeamPolicy


def _snapshot(policy: TeamPolicy) -> dict[str, Any]:
    spec = policy.spec()
    return {
        "allowed_classes": sorted(spec.allowed_classes or ()),
        "allowed_images": sorted(spec.allowed_images or ()),
        "max_gpu_milli_per_workload": spec.max_gpu_milli_per_workload,
        "max_runtime_seconds": dict(spec.max_runtime_seconds),
        "default_idle_timeout_seconds": dict(spec.default_idle_timeout_seconds),
        "exclusive_classes": sorted(spec.exclusive_classes),
    }


def team_policy_set(
    *,
    actor: User,
    team: Team,
    allowed_classes: Sequence[GpuClass] = (),
    allowed_images: Sequence[Image] = (),
    max_gpu_milli_per_workload: int | None = None,
    max_runtime_seconds: Mapping[str, int | None] | None = None,
    idle_timeout_seconds: Mapping[str, int | None] | None = None,
    exclusive_classes: Sequence[GpuClass] = (),
    source_ip: str | None = None,
) -> TeamPolicy:
    """Replace the team's policy as a whole (platform admins; audited with before and after).
    New requests from every door are checked against it at once; running work is left alone."""
    if not platform_may(actor, Act.GOVERN_TEAMS):
        raise PermissionDenied("Only platform admins set team policies.")
    runtimes = {k: (max_runtime_seconds or {}).get(k) for k in core.KINDS}
    idles = {k: (idle_timeout_seconds or {}).get(k) for k in core.KINDS}
    errors = core.policy_errors(
        max_gpu_milli_per_workload=max_gpu_milli_per_workload,
        max_runtime_seconds=runtimes,
        idle_timeout_seconds=idles,
    )
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        policy, created = TeamPolicy.objects.select_for_update().get_or_create(team=team)
        before = None if created else _snapshot(policy)
        policy.max_gpu_milli_per_workload = max_gpu_milli_per_workload
        for kind in core.KINDS:
            setattr(policy, f"max_runtime_{kind}_seconds", runtimes[kind])
            setattr(policy, f"idle_timeout_{kind}_seconds", idles[kind])
        policy.updated_at = timezone.now()
        policy.updated_by = actor
        policy.save()
        policy.allowed_classes.set(allowed_classes)
        policy.allowed_images.set(allowed_images)
        policy.exclusive_classes.set(exclusive_classes)
        audit_record(
            actor=actor,
            action="policy.create" if created else "policy.update",
            obj=policy,
            source_ip=source_ip,
            details={"team": team.slug, "before": before, "after": _snapshot(policy)},
        )
    return policy
