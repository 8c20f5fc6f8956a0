"""The scheduling cycle: under the cycle lock, load a snapshot, call the pure core, persist its
decisions (each kind of decision in its own step of :func:`_persist`) in one transaction, and
hand them to orchestration on commit."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import prefetch_related_objects
from django.utils import timezone

from apps.catalog.models import Cluster
from apps.scheduling import burst, core, handoff, selectors
from apps.scheduling.data import (
    BATCH,
    DEVELOPMENT,
    PRODUCTION,
    TRAINING,
    CycleResult,
    Policy,
)
from apps.workloads import core as workload_core
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.selectors import (
    preemption_grace_seconds,
)
from apps.workloads.services import (
    Transition,
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


Rows = dict[int, Workload]


def _persist(
    result: CycleResult, *, now: datetime, uuids: dict[tuple[str, str], tuple[str, ...]]
) -> CycleRun:
    """Write one cycle's decisions, each kind in its own step, in this order: rejections, the
    queue (everything looked at leaves ``pending``), preemptions, admissions, requeues, ends of
    grace, the waiting rows' position and reason, endpoint scale-ups, borrowed flags."""
    rows = _decided_rows(result)
    rejected = _persist_rejections(result, rows)
    _persist_queued(result, rows)
    preempted = _persist_preemptions(result, rows, now=now)
    admitted = _persist_admissions(result, rows, now=now, uuids=uuids)
    _persist_waits_for(result, rows, admitted)
    requeued = _persist_requeues(result, rows)
    _persist_ended(result, rows, now=now)
    _persist_waiting(result, rows)
    scaled = _persist_scale_ups(result, uuids=uuids)
    _persist_borrowed(result)
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


def _decided_rows(result: CycleResult) -> Rows:
    """Every workload the cycle decided something about, by id, with what the owners' notices
    name (team, GPU class, owner): one query, not three a row."""
    ids = {a.workload_id for a in result.admissions}
    ids |= {p.workload_id for p in result.preemptions}
    ids |= {w.workload_id for w in result.waiting}
    ids |= {r.workload_id for r in result.requeues}
    ids |= {e.workload_id for e in result.ended}
    ids |= {r.workload_id for r in result.rejections}
    return Workload.objects.select_related("team", "gpu_class", "owner").in_bulk(sorted(ids))


def _persist_rejections(result: CycleResult, rows: Rows) -> list[int]:
    """Requests that can never run as asked fail, with the reason."""
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
    return rejected


def _persist_queued(result: CycleResult, rows: Rows) -> None:
    """Everything the cycle has looked at has left ``pending`` (in three statements for all)."""
    looked_at = [a.workload_id for a in result.admissions] + [i.workload_id for i in result.waiting]
    workloads_queue(
        workloads=[w for pk in looked_at if (w := rows.get(pk)) is not None],
        reason="Queued for a GPU.",
    )


def _persist_preemptions(result: CycleResult, rows: Rows, *, now: datetime) -> list[int]:
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
    return preempted


def _persist_admissions(
    result: CycleResult,
    rows: Rows,
    *,
    now: datetime,
    uuids: dict[tuple[str, str], tuple[str, ...]],
) -> list[int]:
    """Admitted workloads move to ``admitted`` with their placement and cluster, together: one
    update each, their events and the owners' notices at once. A lost race (the user cancelled
    meanwhile) leaves the capacity to the next cycle."""
    # What an admission's notice names (team, owner, class): read once for all of them.
    prefetch_related_objects(
        [w for a in result.admissions if (w := rows.get(a.workload_id)) is not None],
        "team",
        "owner",
        "gpu_class",
    )
    clusters = {c.name: c for c in Cluster.objects.all()}
    admissions = [
        Transition(
            workload=w,
            to_state=workload_core.ADMITTED,
            reason=a.reason,
            expected_from=workload_core.QUEUED,
            extra={
                "placement": selectors.placement_to_json(
                    a.placement, gpu_uuids=uuids, allocation=w.gpu_class.allocation_mode
                ),
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
    return [
        t.workload.pk
        for t, moved in zip(admissions, workloads_transition(admissions), strict=True)
        if moved
    ]


def _persist_waits_for(result: CycleResult, rows: Rows, admitted: list[int]) -> None:
    """An admission made by preemption names its victims in its placement (``waits_for``):
    orchestration creates its objects only once their pods are gone, so that the cluster's
    ResourceQuota, which counts terminating pods, never refuses its pods."""
    moved = set(admitted)
    for a in result.admissions:
        w = rows.get(a.workload_id)
        if a.waits_for and a.workload_id in moved and w is not None:
            placement = {**(w.placement or {}), "waits_for": list(a.waits_for)}
            Workload.objects.filter(pk=w.pk).update(placement=placement)
            w.placement = placement


def _persist_requeues(result: CycleResult, rows: Rows) -> list[int]:
    """Preempted workloads whose grace has passed queue again, without their placement."""
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
    return requeued


def _persist_ended(result: CycleResult, rows: Rows, *, now: datetime) -> None:
    """Preempted workloads that do not queue again end, failed, with the reason."""
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


def _persist_waiting(result: CycleResult, rows: Rows) -> None:
    """The waiting workloads' position, estimate, reason and advice, written only where one
    changed and only while the workload still waits."""
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


def _persist_borrowed(result: CycleResult) -> None:
    """Running work whose usage moved above or below its team's guarantee."""
    for workload_id, borrowed in result.borrowed_changes:
        Workload.objects.filter(pk=workload_id, state__in=workload_core.ACTIVE_STATES).update(
            borrowed=borrowed
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
