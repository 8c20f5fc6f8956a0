"""The scheduling cycle: load a snapshot, call the pure core, persist the decisions."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.selectors import teams_visible_to
from apps.catalog.models import Cluster, GpuClass, Image
from apps.catalog.selectors import nodes_being_drained as node_maintenance_draining
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.scheduling import burst, core, handoff, selectors
from apps.scheduling import verdict as verdict_core
from apps.scheduling.data import (
    BATCH,
    DEVELOPMENT,
    PRODUCTION,
    TRAINING,
    CycleResult,
    Policy,
    Preemption,
    WaitingWorkload,
)
from apps.scheduling.verdict import Verdict
from apps.workloads import core as workload_core
from apps.workloads import rules, sizing
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.selectors import (
    QuotaUsage,
    preemption_grace_seconds,
    quota_usage_for_teams,
)
from apps.workloads.services import (
    Transition,
    workload_request_check,
    workload_transition,
    workloads_queue,
    workloads_transition,
)

log = logging.getLogger(__name__)

# Key of the PostgreSQL advisory lock that serialises cycles across workers and threads.
CYCLE_LOCK_KEY = 0x6770_7363  # "gpsc"
WAITING_FIELDS = ["queue_position", "estimated_start_at", "last_reason", "scheduling_advice"]


@dataclass(frozen=True)
class CycleRun:
    admitted: tuple[int, ...]
    preempted: tuple[int, ...]
    requeued: tuple[int, ...]
    rejected: tuple[int, ...]
    waiting: int
    result: CycleResult
    # Endpoints that got another replica this cycle.
    scaled: tuple[int, ...] = ()


def scheduling_policy() -> Policy:
    return Policy(
        min_runtime_seconds={
            PRODUCTION: 0,
            TRAINING: settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS,
            DEVELOPMENT: settings.SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS,
            BATCH: settings.SCHEDULING_MIN_RUNTIME_BATCH_SECONDS,
        },
        grace_seconds=preemption_grace_seconds(),
    )


def _lock_cycle() -> None:
    """Serialise cycles: at most one decides at a time, on data committed before it began.

    The race it prevents: two cycles (after two concurrent submissions, or a submission
    and beat) each read the same free quota and capacity, and each admit into it — the
    team overshoots its limit and GPUs are double-booked. The transaction-scoped advisory
    lock makes the second cycle wait until the first has committed; its snapshot, read
    after the lock, sees the first one's admissions. SQLite (the zero-setup dev default)
    runs its transactions with ``BEGIN IMMEDIATE`` (settings), which already serialises
    writers, so nothing more is needed there.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL lock_timeout = '60s'")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CYCLE_LOCK_KEY])


def scheduling_cycle_run(*, now: datetime | None = None) -> CycleRun:
    """Run one scheduling cycle and persist its decisions in one transaction."""
    with transaction.atomic():
        _lock_cycle()
        now = now or timezone.now()
        burst_terms = selectors.burst_terms()
        snapshot = selectors.scheduling_snapshot(
            now=now,
            half_life_seconds=settings.SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS,
            burst=burst_terms,
        )
        result = burst.annotate(core.schedule(snapshot, scheduling_policy()), snapshot, burst_terms)
        uuids = {(n.cluster, n.name): n.gpu_uuids for n in snapshot.nodes}
        run = _persist(result, now=now, uuids=uuids)
        decisions = handoff.Decisions(
            admitted_ids=run.admitted + run.scaled,
            preempted_ids=run.preempted,
            requeued_ids=run.requeued,
        )
        transaction.on_commit(lambda: handoff.decisions_hand_off(decisions))
    return run


def _persist(
    result: CycleResult, *, now: datetime, uuids: dict[tuple[str, str], tuple[str, ...]]
) -> CycleRun:
    ids = {a.workload_id for a in result.admissions}
    ids |= {p.workload_id for p in result.preemptions}
    ids |= {w.workload_id for w in result.waiting}
    ids |= {r.workload_id for r in result.requeues}
    ids |= {e.workload_id for e in result.ended}
    ids |= {r.workload_id for r in result.rejections}
    # With what the owners' notices name (team, GPU class, owner): one query, not three a row.
    rows = Workload.objects.select_related("team", "gpu_class", "owner").in_bulk(sorted(ids))
    clusters = {c.name: c for c in Cluster.objects.all()}

    rejected = []
    for rejection in result.rejections:
        w = rows.get(rejection.workload_id)
        if w is not None and workload_transition(
            workload=w,
            to_state=workload_core.FAILED,
            reason=f"Cannot run as asked: {rejection.reason}",
            extra={"queue_position": None, "estimated_start_at": None},
        ):
            rejected.append(w.pk)

    # Everything the cycle has looked at has left ``pending`` (in three statements for all).
    looked_at = [a.workload_id for a in result.admissions] + [i.workload_id for i in result.waiting]
    workloads_queue(
        workloads=[w for pk in looked_at if (w := rows.get(pk)) is not None],
        reason="Queued for a GPU.",
    )
    # What an admission's notice names (team, owner, class): read once for all of them.
    prefetch_related_objects(
        [w for a in result.admissions if (w := rows.get(a.workload_id)) is not None],
        "team",
        "owner",
        "gpu_class",
    )

    preempted = []
    for p in result.preemptions:
        w = rows.get(p.workload_id)
        if w is not None and workload_transition(
            workload=w,
            to_state=workload_core.PREEMPTED,
            reason=p.reason,
            extra={"preempted_at": now, "borrowed": False},
        ):
            preempted.append(w.pk)

    admissions = [
        Transition(
            workload=w,
            to_state=workload_core.ADMITTED,
            reason=a.reason,
            expected_from=workload_core.QUEUED,
            extra={
                "placement": selectors.placement_to_json(a.placement, gpu_uuids=uuids),
                "cluster": clusters.get(a.placement.cluster),
                "borrowed": a.borrowed,
                "admitted_at": now,
                "queue_position": None,
                "estimated_start_at": None,
                "scheduling_advice": [],
            },
        )
        for a in result.admissions
        if (w := rows.get(a.workload_id)) is not None
    ]
    # Together: one update each, their events and the owners' notices at once. A lost race
    # (the user cancelled meanwhile) leaves the capacity to the next cycle.
    admitted = [
        t.workload.pk
        for t, moved in zip(admissions, workloads_transition(admissions), strict=True)
        if moved
    ]

    requeued = []
    for r in result.requeues:
        w = rows.get(r.workload_id)
        if w is not None and workload_transition(
            workload=w,
            to_state=workload_core.QUEUED,
            reason=r.reason,
            expected_from=workload_core.PREEMPTED,
            extra={"placement": {}, "cluster": None},
        ):
            requeued.append(w.pk)

    for e in result.ended:
        w = rows.get(e.workload_id)
        if w is not None:
            workload_transition(
                workload=w,
                to_state=workload_core.FAILED,
                reason=e.reason,
                expected_from=workload_core.PREEMPTED,
                extra={"finished_at": now},
            )

    changed: list[Workload] = []
    for info in result.waiting:
        w = rows.get(info.workload_id)
        if w is None or w.state not in workload_core.WAITING_STATES:
            continue
        values = {
            "queue_position": info.position,
            "estimated_start_at": info.estimated_start,
            "last_reason": info.reason[:500],
            "scheduling_advice": list(info.advice),
        }
        if any(getattr(w, f) != v for f, v in values.items()):
            for f, v in values.items():
                setattr(w, f, v)
            changed.append(w)
    if changed:
        _store_waiting(changed)

    scaled = _persist_scale_ups(result, uuids=uuids)

    for workload_id, borrowed in result.borrowed_changes:
        Workload.objects.filter(pk=workload_id, state__in=workload_core.ACTIVE_STATES).update(
            borrowed=borrowed
        )
    if admitted or preempted or requeued or rejected:
        log.info(
            "scheduling cycle: %d admitted, %d preempted, %d requeued, %d rejected, %d waiting",
            len(admitted),
            len(preempted),
            len(requeued),
            len(rejected),
            len(result.waiting),
        )
    return CycleRun(
        admitted=tuple(admitted),
        preempted=tuple(preempted),
        requeued=tuple(requeued),
        rejected=tuple(rejected),
        waiting=len(result.waiting),
        result=result,
        scaled=tuple(scaled),
    )


def _store_waiting(rows: list[Workload]) -> None:
    """Write the waiting workloads' queue position, estimate, reason and advice: on
    PostgreSQL one ``UPDATE … FROM (VALUES …)`` per 1,000 rows (a cycle moves the position of
    everyone behind an admission, so this is most of the queue each time), elsewhere
    ``bulk_update``. Only rows still waiting are written: one cancelled meanwhile keeps its
    own reason."""
    if connection.vendor != "postgresql":
        Workload.objects.bulk_update(rows, WAITING_FIELDS, batch_size=500)
        return
    meta = Workload._meta
    column = {f.name: f.column for f in meta.concrete_fields}
    waiting = sorted(workload_core.WAITING_STATES)
    advice = meta.get_field("scheduling_advice")
    for start in range(0, len(rows), 1000):
        chunk = rows[start : start + 1000]
        values = ", ".join(
            ["(%s::bigint, %s::integer, %s::timestamptz, %s::text, %s::jsonb)"] * len(chunk)
        )
        params: list[Any] = []
        for w in chunk:
            params += [
                w.pk,
                w.queue_position,
                w.estimated_start_at,
                w.last_reason,
                advice.get_db_prep_value(w.scheduling_advice, connection),
            ]
        sql = f"""
            UPDATE "{meta.db_table}" AS w SET
                "{column["queue_position"]}" = v.position,
                "{column["estimated_start_at"]}" = v.estimate,
                "{column["last_reason"]}" = v.reason,
                "{column["scheduling_advice"]}" = v.advice
            FROM (VALUES {values}) AS v(id, position, estimate, reason, advice)
            WHERE w."{column["id"]}" = v.id AND w."{column["state"]}" = ANY(%s)
        """  # noqa: S608 - table and column names are the model's, values are parameters
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, waiting])


def _persist_scale_ups(
    result: CycleResult, *, uuids: dict[tuple[str, str], tuple[str, ...]]
) -> list[int]:
    """An endpoint's admitted scale-up is one more replica of it (on the cluster it runs on);
    one that waits leaves its reason on the endpoint. Returns the endpoints that grew."""
    admitted: dict[int, list[Any]] = {}
    for a in result.admissions:
        endpoint_id = selectors.scale_up_endpoint(a.workload_id)
        if endpoint_id is not None:
            admitted.setdefault(endpoint_id, []).append(a)
    waiting: dict[int, str] = {}
    for info in result.waiting:
        endpoint_id = selectors.scale_up_endpoint(info.workload_id)
        if endpoint_id is not None:
            waiting.setdefault(endpoint_id, info.reason[:500])
    scaled = []
    for endpoint_id in sorted(admitted.keys() | waiting.keys()):
        # The endpoint's row lock: its owner scaling it down meanwhile cannot be undone here.
        w = Workload.objects.select_for_update().filter(pk=endpoint_id).first()
        if w is None or w.state not in workload_core.ACTIVE_STATES:
            continue
        params = dict(w.params or {})
        endpoint = dict(params.get("endpoint") or {})
        placement = dict(w.placement or {})
        replicas = list(placement.get("replicas") or [])
        grown = 0
        for a in admitted.get(endpoint_id, []):
            if w.replicas + grown >= selectors.endpoint_target(params):
                break
            if placement.get("cluster") not in (None, a.placement.cluster):
                continue  # another cluster: its replicas all run where it runs
            replicas.extend(selectors.placement_to_json(a.placement, gpu_uuids=uuids)["replicas"])
            grown += 1
        endpoint["scale_waiting"] = waiting.get(endpoint_id, "")
        params["endpoint"] = endpoint
        changes: dict[str, Any] = {"params": params}
        if grown:
            placement["replicas"] = replicas
            changes.update(replicas=w.replicas + grown, placement=placement)
        Workload.objects.filter(pk=w.pk).update(**changes)
        if grown:
            WorkloadEvent.objects.create(
                workload=w,
                from_state=w.state,
                to_state=w.state,
                reason=f"Scaled up to {w.replicas + grown} replicas (admitted on the team's "
                "guarantee).",
            )
            scaled.append(w.pk)
    return scaled


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
    verdict = verdict_core.preview(snapshot, candidate, scheduling_policy())
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


# --- nodes being drained ---------------------------------------------------------------------


def _on_node(workload: Workload, cluster: Cluster, node: str) -> bool:
    placement = selectors.placement_from_json(workload.placement)
    if placement is None:
        return False
    same_cluster = workload.cluster_id == cluster.pk or placement.cluster == cluster.name
    return same_cluster and any(r.node == node for r in placement.replicas)


def node_drain_pass(*, now: datetime | None = None) -> tuple[int, ...]:
    """Move the work off every node in an open maintenance window that drains: each workload
    placed there is preempted with its class's grace period (the pod's
    terminationGracePeriodSeconds) and a notice to its owner, then goes back to the queue,
    whatever it chose for preemption; the scheduler places nothing new there meanwhile.
    Returns the ids moved."""
    moment = now or timezone.now()
    graces = preemption_grace_seconds()
    moved: list[int] = []
    with transaction.atomic():
        _lock_cycle()  # never between a cycle's snapshot and its decisions
        windows = list(node_maintenance_draining(now=moment))
        if not windows:
            return ()
        active = Workload.objects.units().filter(state__in=workload_core.ACTIVE_STATES)
        for workload in active.select_related("team", "owner").order_by("id"):
            window = next(
                (w for w in windows if _on_node(workload, w.node.cluster, w.node.name)), None
            )
            if window is None:
                continue
            grace = graces.get(workload.priority_class, 0)
            reason = (
                f"{selectors.DRAIN_PREFIX} {window.node.name} is drained for maintenance "
                f"until {window.ends_at:%Y-%m-%d %H:%M} UTC ({window.reason}). It has {grace} s "
                "to save a checkpoint, then returns to the queue and starts on another node."
            )
            if not workload_transition(
                workload=workload,
                to_state=workload_core.PREEMPTED,
                reason=reason[:500],
                extra={"preempted_at": moment, "borrowed": False},
            ):
                continue
            moved.append(workload.pk)
            notify(
                event=NoticeEvent.NODE_DRAIN,
                users=[workload.owner],
                title=f"{workload.get_kind_display()} {workload.name} moves off {window.node.name}",
                body=reason,
                key=f"node-drain-{window.pk}-{workload.pk}",
                link=f"/workloads/{workload.pk}/",
                team=workload.team,
            )
        if moved:
            decisions = handoff.Decisions(admitted_ids=(), preempted_ids=tuple(moved))
            transaction.on_commit(lambda: handoff.decisions_hand_off(decisions))
            log.info("node drain: %d workloads moved off nodes in maintenance", len(moved))
    return tuple(moved)
