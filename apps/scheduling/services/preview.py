"""What a request would meet if submitted now, without submitting it: the workloads it would
preempt (and whether the person must confirm), the scheduler's verdict, and the dry run of a
request (its charge, the answer, its hourly cost and the quota it would use)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.selectors import teams_visible_to
from apps.catalog.models import GpuClass, Image
from apps.scheduling import core, selectors
from apps.scheduling import verdict as verdict_core
from apps.scheduling.data import (
    Preemption,
    WaitingWorkload,
)
from apps.scheduling.services.cycle import scheduling_policy
from apps.scheduling.verdict import Verdict
from apps.workloads import rules, sizing
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    QuotaUsage,
    quota_usage_for_teams,
)
from apps.workloads.services import (
    workload_request_check,
)

# --- the preemption dry run ------------------------------------------------------------------


@dataclass(frozen=True)
class PreemptionVictim:
    """A running workload that a request would preempt if it were submitted now."""

    # Who, when the person asking may see the workload (a team of theirs); else None: another
    # team's work is named only by its team and size, as its own pages are hidden.
    id: int | None
    name: str | None
    kind: str
    owner: str | None  # username
    team: str  # slug
    total_milli: int
    gpus: str  # "8 GPU H100-80GB", "2 × 4 GPU H100-80GB"
    yours: bool  # owned by the person asking
    same_team: bool  # in the team the request is for: a teammate's or the person's own

    def describe(self) -> str:
        """``#12 notebook “big” (yours, 8 GPU H100-80GB)``."""
        if self.id is None:
            return f"a {self.kind} of {self.team} on borrowed capacity ({self.gpus})"
        whose = "yours" if self.yours else self.owner
        if not self.same_team:
            whose = f"{self.owner} of {self.team}, borrowed capacity"
        return f"#{self.id} {self.kind} “{self.name}” ({whose}, {self.gpus})"


def confirmation_needed(victims: list[PreemptionVictim]) -> bool:
    """Stopping the person's own or a teammate's work needs their say-so; reclaiming capacity
    another team borrowed is the rule that let that team borrow it, so it is only named."""
    return any(v.same_team for v in victims)


def teammates_to_preempt(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    request: rules.WorkloadRequest,
    charge: rules.Charge,
) -> list[PreemptionVictim]:
    """What a submission must confirm first: the running work of the person or a teammate
    that submitting ``request`` now would preempt (:func:`confirmation_needed`), else []. The
    same decision as :func:`preemption_preview` followed by :func:`confirmation_needed`, but
    the dry run (which reads every live workload of every team) runs only when the team has
    work the request's class may preempt at all, so a submission costs the same whatever the
    size of the queue."""
    if not selectors.team_runs_preemptible(team, gpu_class, charge.priority_class):
        return []
    victims = preemption_preview(
        actor=actor, team=team, gpu_class=gpu_class, request=request, charge=charge
    )
    return victims if confirmation_needed(victims) else []


def _candidate(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    request: rules.WorkloadRequest,
    charge: rules.Charge,
    now: datetime,
) -> WaitingWorkload:
    defaults = {f.name: f.get_default() for f in Workload._meta.fields}
    return WaitingWorkload(
        id=core.PREVIEW_ID,
        team=team.name,
        owner=actor.get_username(),
        gpu_class=gpu_class.name,
        priority=charge.priority_class,
        gpu_milli=charge.gpu_milli,
        charged_milli=charge.charged_milli,
        replicas=charge.replicas,
        submitted_at=now,
        cpu_milli=int(defaults["cpu_milli"]),
        memory_mib=int(defaults["memory_mib"]),
        max_runtime_seconds=request.max_runtime_seconds,
        name=request.name,
    )


def _victims(
    actor: User, team: Team, preemptions: tuple[Preemption, ...]
) -> list[PreemptionVictim]:
    rows = Workload.objects.select_related("owner", "team", "gpu_class").in_bulk(
        [p.workload_id for p in preemptions]
    )
    visible = set(teams_visible_to(actor).values_list("pk", flat=True))
    victims = []
    for p in preemptions:
        w = rows.get(p.workload_id)
        if w is None:
            continue
        shown = w.team_id in visible
        victims.append(
            PreemptionVictim(
                id=w.pk if shown else None,
                name=w.name if shown else None,
                kind=rules.KIND_LABELS.get(w.kind, w.kind),
                owner=w.owner.get_username() if shown else None,
                team=w.team.slug,
                total_milli=w.total_milli,
                gpus=sizing.request_label(w.gpu_milli, w.replicas, w.gpu_class.name),
                yours=w.owner_id == actor.pk,
                same_team=w.team_id == team.pk,
            )
        )
    return victims


def preemption_preview(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    request: rules.WorkloadRequest,
    charge: rules.Charge,
    now: datetime | None = None,
) -> list[PreemptionVictim]:
    """The running workloads that submitting ``request`` (accepted, as ``charge``) now would
    preempt: the scheduling core's own decision on the current snapshot with the request
    added as the newest waiting workload (:func:`verdict.preview`). Writes nothing
    and takes no lock: what a door shows before asking the person to confirm."""
    return request_verdict(
        actor=actor, team=team, gpu_class=gpu_class, request=request, charge=charge, now=now
    ).victims


@dataclass(frozen=True)
class RequestVerdict:
    """What submitting a request now would do (:mod:`apps.scheduling.verdict`), with the
    workloads it would preempt named as the person asking may see them."""

    verdict: Verdict
    victims: list[PreemptionVictim]

    @property
    def headline(self) -> str:
        return self.verdict.headline("; ".join(v.describe() for v in self.victims))

    def as_dict(self) -> dict[str, Any]:
        """The verdict as the API's dry run and the portal's live verdict answer it."""
        v = self.verdict
        return {
            "outcome": v.outcome,
            "headline": self.headline,
            "reason": v.reason,
            "nodes": list(v.nodes),
            "cluster": v.cluster or None,
            "borrowed": v.borrowed,
            "queue_position": v.position,
            "estimated_start_at": v.estimated_start,
            "estimated_wait_seconds": v.wait_seconds,
            "advice": list(v.advice),
            # A sweep: its trials that may run at once and how many of them start now.
            "trials_at_once": v.trials_at_once or None,
            "trials_started": v.trials_started if v.trials_at_once else None,
        }


def request_verdict(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    request: rules.WorkloadRequest,
    charge: rules.Charge,
    now: datetime | None = None,
) -> RequestVerdict:
    """The scheduling core's dry run for ``request`` (accepted by the rules, as ``charge``) on
    the current snapshot: starts now (where), would preempt (whom), or waits (position,
    estimate, reason and advice of one computation). Writes nothing and takes no lock."""
    now = now or timezone.now()
    snapshot = selectors.scheduling_snapshot(
        now=now, half_life_seconds=settings.SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS
    )
    candidate = _candidate(
        actor=actor, team=team, gpu_class=gpu_class, request=request, charge=charge, now=now
    )
    # A sweep meets the cycle as its trials, each charged on its own, at most its parallelism
    # at once (what the submission records and the cycle admits), never as one unit of all.
    verdict = verdict_core.preview(
        snapshot, candidate, scheduling_policy(), parallelism=charge.parallelism
    )
    return RequestVerdict(verdict, _victims(actor, team, verdict.preemptions))


@dataclass(frozen=True)
class DryRun:
    """A request checked by the rules and run through the scheduler without recording it:
    what it is charged, what it costs per hour while it runs, the team's quota left on the
    class now, and the verdict. One answer for the API's dry run and the portal's form."""

    charge: rules.Charge
    answer: RequestVerdict
    hourly_cost: Decimal
    quota: QuotaUsage | None

    @property
    def quota_left_milli(self) -> int | None:
        if self.quota is None:
            return None
        return max(0, self.quota.limit_milli - self.quota.used_milli)


def request_dry_run(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    image: Image,
    request: rules.WorkloadRequest,
    now: datetime | None = None,
) -> DryRun:
    """The rules (``ValidationError`` with field → message, as a submission), then the
    scheduler's verdict. Records nothing."""
    charge = workload_request_check(
        actor=actor, team=team, gpu_class=gpu_class, image=image, request=request
    )
    answer = request_verdict(
        actor=actor, team=team, gpu_class=gpu_class, request=request, charge=charge, now=now
    )
    at_once = charge.parallelism or charge.replicas
    hourly = (Decimal(charge.charged_milli * at_once) * gpu_class.hourly_cost / 1000).quantize(
        Decimal("0.01")
    )
    usage = next((u for u in quota_usage_for_teams([team]) if u.gpu_class.pk == gpu_class.pk), None)
    return DryRun(charge, answer, hourly, usage)
