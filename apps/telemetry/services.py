"""Telemetry writes: the ingestion pass (accounting and idle policy), idle suspension for the
system actor, and node health reports."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.selectors import team_leads
from apps.audit.services import audited_delete, audited_save
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
from apps.orchestration import manifests as m
from apps.orchestration import reads
from apps.orchestration.errors import ClusterError
from apps.orchestration.selectors import enabled_clusters
from apps.telemetry import core
from apps.telemetry.models import (
    IdleNotice,
    IdlePolicy,
    IngestCursor,
    NodeHealthReport,
    UsageDay,
    WorkloadUsage,
)
from apps.telemetry.prom import PrometheusClient, default_client
from apps.telemetry.selectors import node_resolver
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import workload_suspend_idle

log = logging.getLogger(__name__)

PodIndex = Mapping[tuple[str, str], core.PodAllocation]
ACTED_KINDS = (wl.KIND_NOTEBOOK, wl.KIND_TRAINING, wl.KIND_SWEEP)
ENDED_HOLDING_STATES = (wl.SUSPENDED, wl.PREEMPTED)


@dataclass
class IngestResult:
    skipped: bool = False
    window_seconds: float = 0.0
    series: int = 0
    workloads: int = 0
    measured: int = 0
    warned: list[int] = field(default_factory=list)
    suspended: list[int] = field(default_factory=list)
    flagged: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


# --- the pod index: which pod belongs to which workload ----------------------------------


def pod_index_build(
    pods: Iterable[Mapping[str, Any]], workloads: Mapping[int, tuple[str, int]]
) -> dict[tuple[str, str], core.PodAllocation]:
    """(namespace, pod) → allocation, from pods carrying our workload label.

    ``workloads`` maps a workload id to (its team's namespace, milli-GPU per replica). A pod
    counts only in its workload's team namespace: one team is never credited with a pod
    another team labelled with its workload id.
    """
    index: dict[tuple[str, str], core.PodAllocation] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(m.LABEL_WORKLOAD, "")
        if not owner.isdigit() or int(owner) not in workloads:
            continue
        namespace, milli = workloads[int(owner)]
        if meta.get("namespace") != namespace:
            continue
        index[(namespace, meta["name"])] = core.PodAllocation(int(owner), milli / 1000)
    return index


def pod_index_from_clusters(
    workload_ids: Iterable[int],
) -> dict[tuple[str, str], core.PodAllocation]:
    ids = set(workload_ids)
    if not ids:
        return {}
    workloads = {
        pk: (namespace, milli)
        for pk, namespace, milli in Workload.objects.filter(pk__in=ids).values_list(
            "pk",
            "team__namespace",
            "charged_milli",  # what each pod is granted
        )
    }
    pods: list[dict[str, Any]] = []
    for cluster in enabled_clusters():
        try:
            pods += reads.labelled_pods(cluster)
        except ClusterError as exc:
            log.warning("telemetry: pods of cluster %s unknown this cycle: %s", cluster.name, exc)
    return pod_index_build(pods, workloads)


# --- idle policies -----------------------------------------------------------------------


def idle_policy_save(
    *, actor: User | None, policy: IdlePolicy, source_ip: str | None = None
) -> IdlePolicy:
    """Create or change an idle policy from its edited row; the next ingestion pass applies it.
    Records what changed (nothing when an edit changed nothing)."""
    return audited_save(actor=actor, obj=policy, action="idlepolicy", source_ip=source_ip)[0]


def idle_policy_delete(
    *, actor: User | None, policy: IdlePolicy, source_ip: str | None = None
) -> None:
    """Delete an idle policy: a less specific one, or the settings' defaults, apply again."""
    audited_delete(actor=actor, obj=policy, action="idlepolicy", source_ip=source_ip)


# --- ingestion ---------------------------------------------------------------------------


def _fetch_samples(client: PrometheusClient, window: float, at: datetime) -> list[core.Sample]:
    samples: list[core.Sample] = []
    for name, promql in core.accounting_queries(round(window)).items():
        samples += core.samples_from_vector(name, client.query(promql, at=at))
    return samples


def exporter_targets(client: PrometheusClient) -> frozenset[tuple[str, str]]:
    """(namespace, pod) of the exporters Prometheus scrapes: these labels on a series are the
    exporter's own, not a workload's."""
    return core.exporter_targets(client.query(core.EXPORTER_TARGETS_QUERY))


def _policy_defaults() -> core.IdlePolicy:
    return core.IdlePolicy(
        enabled=True,
        threshold=settings.TELEMETRY_IDLE_THRESHOLD_PERCENT / 100,
        warn_after=timedelta(seconds=settings.TELEMETRY_IDLE_WARN_SECONDS),
        suspend_after=timedelta(seconds=settings.TELEMETRY_IDLE_SUSPEND_SECONDS),
        flag_after=timedelta(seconds=settings.TELEMETRY_IDLE_FLAG_SECONDS),
    )


class PolicyBook:
    """Resolves the idle policy of a team and GPU class: most specific row wins."""

    def __init__(self) -> None:
        self.rows = {(p.team_id, p.gpu_class_id): p for p in IdlePolicy.objects.all()}
        self.default = _policy_defaults()

    def for_workload(self, team_id: int, gpu_class_id: int) -> core.IdlePolicy:
        for key in ((team_id, gpu_class_id), (team_id, None), (None, gpu_class_id), (None, None)):
            row = self.rows.get(key)
            if row is not None:
                return core.IdlePolicy(
                    enabled=row.enabled,
                    threshold=row.threshold_percent / 100,
                    warn_after=row.warn_after,
                    suspend_after=row.suspend_after,
                    flag_after=row.flag_after,
                )
        return self.default


def _day_segments(start: datetime, end: datetime) -> list[tuple[date, datetime, datetime]]:
    segments = []
    cursor = start
    while cursor < end:
        day = cursor.astimezone(UTC).date()
        midnight = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        segment_end = min(end, midnight)
        segments.append((day, cursor, segment_end))
        cursor = segment_end
    return segments


@dataclass(frozen=True)
class Held:
    """A workload that held GPUs in the window, as plain data (thousands per pass)."""

    pk: int
    name: str
    kind: str
    state: str
    team_id: int
    owner_id: int
    gpu_class_id: int
    gpu_milli: int
    charged_milli: int
    replicas: int
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    cluster_id: int | None  # where it runs: a burst cluster may price GPU-hours its own way
    # Its own idle timeout (asked for, or its team policy's default); None: the idle policy's.
    idle_timeout_seconds: int | None = None

    @property
    def total_milli(self) -> int:
        """What it holds and is charged: what the cluster grants (``replicas × charged_milli``)."""
        return self.charged_milli * self.replicas

    def get_kind_display(self) -> str:
        return str(dict(Workload.Kind.choices).get(self.kind, self.kind))


HELD_FIELDS = tuple(f.name for f in Held.__dataclass_fields__.values())


def _accounted_workloads(window_start: datetime) -> list[Held]:
    """Workloads that held GPUs during the window: running, or stopped since it began."""
    rows = (
        Workload.objects.units()  # a sweep's GPU-hours are its trials'
        .filter(started_at__isnull=False)
        .filter(
            Q(state__in=(wl.STARTING, wl.RUNNING))
            | Q(finished_at__gt=window_start)
            | Q(state__in=ENDED_HOLDING_STATES, updated_at__gt=window_start)
        )
        .values_list(*HELD_FIELDS)
    )
    return [Held(*row) for row in rows]


def telemetry_ingest(
    *,
    now: datetime | None = None,
    client: PrometheusClient | None = None,
    pod_index: PodIndex | None = None,
) -> IngestResult:
    """One accounting and idle-policy pass over the window since the last one.

    Passes are serialised by a row lock on the cursor, so two beat ticks (or a slow pass and the
    next one) never count the same seconds twice.
    """
    moment = now or timezone.now()
    result = IngestResult()
    own_client = client is None
    prometheus = client or default_client()
    timer = time.perf_counter()
    try:
        IngestCursor.objects.get_or_create(pk=1)
        with transaction.atomic():
            cursor = IngestCursor.objects.select_for_update().get(pk=1)
            interval = timedelta(seconds=settings.TELEMETRY_INGEST_SECONDS)
            longest = max(interval * 3, timedelta(minutes=10))
            window_start = max(cursor.until or (moment - interval), moment - longest)
            if moment - window_start < timedelta(seconds=1):
                result.skipped = True
                return result
            window = (moment - window_start).total_seconds()
            result.window_seconds = window
            workloads = _accounted_workloads(window_start)
            result.workloads = len(workloads)
            mark = time.perf_counter()
            samples = _fetch_samples(prometheus, window, moment)
            exporters = exporter_targets(prometheus)
            result.timings["query"] = time.perf_counter() - mark
            result.series = len(samples)
            mark = time.perf_counter()
            index = (
                pod_index
                if pod_index is not None
                else pod_index_from_clusters(w.pk for w in workloads)
            )
            result.timings["pods"] = time.perf_counter() - mark
            mark = time.perf_counter()
            readings = core.readings_from_samples(samples, exporters=exporters)
            measures = core.measure_workloads(readings, index)
            pods_of: dict[int, list[list[str]]] = {}
            for (namespace, pod), allocation in index.items():
                pods_of.setdefault(allocation.workload_id, []).append([namespace, pod])
            result.timings["join"] = time.perf_counter() - mark
            mark = time.perf_counter()
            _account(workloads, measures, pods_of, window_start, moment, result)
            result.timings["write"] = time.perf_counter() - mark
            cursor.until = moment
            cursor.last_series = result.series
            cursor.last_workloads = result.workloads
            cursor.last_duration_ms = int((time.perf_counter() - timer) * 1000)
            cursor.last_error = ""
            cursor.save()
    finally:
        if own_client:
            prometheus.close()
    return result


@dataclass
class UsageState:
    """A workload's WorkloadUsage row as plain data (no model instances in the hot loop)."""

    workload_id: int
    allocated_gpu_seconds: float = 0.0
    used_gpu_seconds: float = 0.0
    measured_seconds: float = 0.0
    last_utilisation: float | None = None
    last_sample_at: datetime | None = None
    pods: list[Any] = field(default_factory=list)
    idle_since: datetime | None = None
    warned_at: datetime | None = None
    flagged_at: datetime | None = None


def _usage_states(ids: list[int]) -> dict[int, UsageState]:
    rows = WorkloadUsage.objects.filter(workload_id__in=ids).values_list(
        "workload_id", *USAGE_FIELDS
    )
    return {row[0]: UsageState(*row) for row in rows}


@dataclass
class DayIncrement:
    workload: Held
    day: date
    allocated: float
    used: float
    unmeasured: float
    cost: Decimal


def _account(
    workloads: list[Held],
    measures: Mapping[int, core.WorkloadMeasure],
    pods_of: Mapping[int, list[list[str]]],
    window_start: datetime,
    now: datetime,
    result: IngestResult,
) -> None:
    usages = _usage_states([w.pk for w in workloads])
    hourly = dict(GpuClass.objects.values_list("pk", "hourly_cost"))
    cluster_hourly: dict[int | None, Decimal] = {
        pk: cost
        for pk, cost in Cluster.objects.filter(gpu_hourly_cost__isnull=False).values_list(
            "pk", "gpu_hourly_cost"
        )
        if cost is not None
    }
    segments = _day_segments(window_start, now)
    policies = PolicyBook()
    usage_rows: list[UsageState] = []
    increments: list[DayIncrement] = []
    for workload in workloads:
        measure = measures.get(workload.pk)
        utilisation = measure.utilisation if measure else None
        if utilisation is not None:
            result.measured += 1
        gpus = workload.total_milli / 1000
        usage = usages.get(workload.pk) or UsageState(workload.pk)
        end_of_holding = workload.finished_at
        if workload.state in ENDED_HOLDING_STATES:
            end_of_holding = workload.updated_at
        for day, start, end in segments:
            seconds = core.overlap_seconds(workload.started_at, end_of_holding, start, end)
            if seconds <= 0:
                continue
            allocated = gpus * seconds
            # Unmeasured is no data: neither used nor idle.
            unmeasured = allocated if utilisation is None else 0.0
            used = allocated * (utilisation or 0.0)
            price = cluster_hourly.get(workload.cluster_id, hourly[workload.gpu_class_id])
            cost = core.price(allocated, price)
            increments.append(DayIncrement(workload, day, allocated, used, unmeasured, cost))
            usage.allocated_gpu_seconds += allocated
            usage.used_gpu_seconds += used
            if utilisation is not None:
                usage.measured_seconds += seconds
        usage.last_utilisation = utilisation
        usage.last_sample_at = now if utilisation is not None else usage.last_sample_at
        usage.pods = pods_of.get(workload.pk, usage.pods if utilisation is None else [])
        if workload.state == wl.RUNNING and workload.kind in ACTED_KINDS:
            _apply_idle_policy(workload, usage, utilisation, policies, window_start, now, result)
        elif workload.state != wl.RUNNING:
            usage.idle_since = usage.warned_at = usage.flagged_at = None
        usage_rows.append(usage)
    if connection.vendor == "postgresql":
        _write_postgresql(usage_rows, increments)
    else:
        _write_portable(usage_rows, increments)
    _close_finished_suspensions(now)


USAGE_FIELDS = (
    "allocated_gpu_seconds",
    "used_gpu_seconds",
    "measured_seconds",
    "last_utilisation",
    "last_sample_at",
    "pods",
    "idle_since",
    "warned_at",
    "flagged_at",
)


def _write_postgresql(usages: list[UsageState], increments: list[DayIncrement]) -> None:
    """Two set-based statements (arrays unnested server-side): a cycle over thousands of
    workloads costs two round trips. Daily rows are incremented in SQL, not read first."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {WorkloadUsage._meta.db_table}
                (workload_id, {", ".join(USAGE_FIELDS)})
            SELECT w, a, u, m, l, s, p::jsonb, i, wa, f
            FROM unnest(%s::bigint[], %s::float8[], %s::float8[], %s::float8[], %s::float8[],
                        %s::timestamptz[], %s::text[], %s::timestamptz[], %s::timestamptz[],
                        %s::timestamptz[]) AS t(w, a, u, m, l, s, p, i, wa, f)
            ON CONFLICT (workload_id) DO UPDATE SET
                {", ".join(f"{f} = EXCLUDED.{f}" for f in USAGE_FIELDS)}
            """,  # noqa: S608 - table and column names are ours, values are parameters
            [
                [u.workload_id for u in usages],
                [u.allocated_gpu_seconds for u in usages],
                [u.used_gpu_seconds for u in usages],
                [u.measured_seconds for u in usages],
                [u.last_utilisation for u in usages],
                [u.last_sample_at for u in usages],
                [json.dumps(u.pods or []) for u in usages],
                [u.idle_since for u in usages],
                [u.warned_at for u in usages],
                [u.flagged_at for u in usages],
            ],
        )
        if not increments:
            return
        table = UsageDay._meta.db_table
        cursor.execute(
            f"""
            INSERT INTO {table} (day, workload_id, team_id, owner_id, gpu_class_id,
                                 allocated_gpu_seconds, used_gpu_seconds,
                                 unmeasured_gpu_seconds, cost)
            SELECT * FROM unnest(%s::date[], %s::bigint[], %s::bigint[], %s::bigint[],
                                 %s::bigint[], %s::float8[], %s::float8[], %s::float8[],
                                 %s::numeric[])
            ON CONFLICT (workload_id, day) DO UPDATE SET
                allocated_gpu_seconds = {table}.allocated_gpu_seconds
                                        + EXCLUDED.allocated_gpu_seconds,
                used_gpu_seconds = {table}.used_gpu_seconds + EXCLUDED.used_gpu_seconds,
                unmeasured_gpu_seconds = {table}.unmeasured_gpu_seconds
                                         + EXCLUDED.unmeasured_gpu_seconds,
                cost = {table}.cost + EXCLUDED.cost
            """,  # noqa: S608 - table and column names are ours, values are parameters
            [
                [i.day for i in increments],
                [i.workload.pk for i in increments],
                [i.workload.team_id for i in increments],
                [i.workload.owner_id for i in increments],
                [i.workload.gpu_class_id for i in increments],
                [i.allocated for i in increments],
                [i.used for i in increments],
                [i.unmeasured for i in increments],
                [i.cost for i in increments],
            ],
        )


def _write_portable(usages: list[UsageState], increments: list[DayIncrement]) -> None:
    """The same writes through the ORM (SQLite, the zero-setup development database)."""
    WorkloadUsage.objects.bulk_create(
        [
            WorkloadUsage(workload_id=u.workload_id, **{f: getattr(u, f) for f in USAGE_FIELDS})
            for u in usages
        ],
        update_conflicts=True,
        unique_fields=["workload"],
        update_fields=list(USAGE_FIELDS),
        batch_size=500,
    )
    keys = {(i.workload.pk, i.day) for i in increments}
    rows = {
        (r.workload_id, r.day): r
        for r in UsageDay.objects.filter(
            workload_id__in={k[0] for k in keys}, day__in={k[1] for k in keys}
        )
    }
    for inc in increments:
        row = rows.get((inc.workload.pk, inc.day))
        if row is None:
            row = rows[(inc.workload.pk, inc.day)] = UsageDay(
                day=inc.day,
                workload_id=inc.workload.pk,
                team_id=inc.workload.team_id,
                owner_id=inc.workload.owner_id,
                gpu_class_id=inc.workload.gpu_class_id,
            )
        row.allocated_gpu_seconds += inc.allocated
        row.used_gpu_seconds += inc.used
        row.unmeasured_gpu_seconds += inc.unmeasured
        row.cost = Decimal(row.cost) + inc.cost
    UsageDay.objects.bulk_create(
        list(rows.values()),
        update_conflicts=True,
        unique_fields=["workload", "day"],
        update_fields=[
            "allocated_gpu_seconds",
            "used_gpu_seconds",
            "unmeasured_gpu_seconds",
            "cost",
        ],
        batch_size=500,
    )


def _apply_idle_policy(
    workload: Held,
    usage: UsageState,
    utilisation: float | None,
    policies: PolicyBook,
    window_start: datetime,
    now: datetime,
    result: IngestResult,
) -> None:
    policy = core.with_idle_timeout(
        policies.for_workload(workload.team_id, workload.gpu_class_id),
        kind=workload.kind,
        timeout_seconds=workload.idle_timeout_seconds,
    )
    decision = core.idle_decide(
        kind=workload.kind,
        utilisation=utilisation,
        policy=policy,
        state=core.IdleState(usage.idle_since, usage.warned_at, usage.flagged_at),
        window_start=window_start,
        now=now,
    )
    usage.idle_since = decision.idle_since
    if decision.busy_again and (usage.warned_at or usage.flagged_at):
        usage.warned_at = usage.flagged_at = None
        IdleNotice.objects.filter(
            workload_id=workload.pk,
            kind__in=(IdleNotice.Kind.WARNED, IdleNotice.Kind.FLAGGED),
            resolved_at__isnull=True,
        ).update(resolved_at=now)
    if decision.idle_since is None:
        return
    idle_for = core.describe_minutes(now - decision.idle_since)
    below = f"GPU < {policy.threshold * 100:g}%"
    gpus = workload.total_milli / 1000
    common = {
        "workload_id": workload.pk,
        "utilisation": utilisation or 0.0,
        "idle_since": decision.idle_since,
        "allocated_gpus": gpus,
        "created_at": now,
    }
    if decision.warn:
        suspend_at = decision.idle_since + policy.suspend_after
        warned = IdleNotice.objects.create(
            kind=IdleNotice.Kind.WARNED,
            message=(
                f"Your notebook's GPU has been idle for {idle_for} ({below}). It will be "
                f"suspended at {suspend_at:%H:%M} UTC unless it is used; your files are kept."
            ),
            **common,
        )
        model = Workload.objects.select_related("owner", "team").get(pk=workload.pk)
        notify(
            event=NoticeEvent.IDLE_WARNING,
            users=[model.owner],
            title=f"Notebook {model.name} will be suspended at {suspend_at:%H:%M} UTC",
            body=warned.message,
            key=f"idle-notice-{warned.pk}",
            link=f"/workloads/{model.pk}/",
            team=model.team,
        )
        usage.warned_at = now
        result.warned.append(workload.pk)
    if decision.suspend:
        reason = (
            f"Suspended after {idle_for} idle ({below}); your files are kept — resume in one click."
        )
        model = Workload.objects.get(pk=workload.pk)
        if telemetry_idle_suspend(workload=model, reason=reason, notice=common):
            usage.idle_since = usage.warned_at = None
            result.suspended.append(workload.pk)
    if decision.flag:
        message = (
            f"{workload.get_kind_display()} {workload.name} holds {gpus:g} GPU that have been "
            f"idle for {idle_for} ({below}). Please check it, or cancel it to free the GPUs."
        )
        flagged = IdleNotice.objects.create(kind=IdleNotice.Kind.FLAGGED, message=message, **common)
        usage.flagged_at = now
        result.flagged.append(workload.pk)
        model = Workload.objects.select_related("owner", "team").get(pk=workload.pk)
        # Owner and team leads, each through the channels they chose (delivered on commit).
        notify(
            event=NoticeEvent.IDLE_WARNING,
            users=[model.owner, *team_leads(model.team_id)],
            title=f"Idle GPUs: {model.name} (#{model.pk})",
            body=message,
            key=f"idle-notice-{flagged.pk}",
            link=f"/workloads/{model.pk}/",
            team=model.team,
        )


def telemetry_idle_suspend(
    *, workload: Workload, reason: str, notice: Mapping[str, Any] | None = None
) -> bool:
    """Suspend an idle notebook as the system (the one suspend of the workloads app) and record
    the notice. False if it is not a running notebook or lost a race."""
    with transaction.atomic():
        if not workload_suspend_idle(workload=workload, reason=reason):
            return False
        values = dict(notice or {})
        values.pop("workload", None)
        values["workload_id"] = workload.pk
        values.setdefault("utilisation", 0.0)
        values.setdefault("idle_since", timezone.now())
        values.setdefault("allocated_gpus", workload.total_milli / 1000)
        IdleNotice.objects.create(kind=IdleNotice.Kind.SUSPENDED, message=reason, **values)
    return True


def _close_finished_suspensions(now: datetime) -> None:
    """A suspension's reclaimed time ends when the notebook is resumed, cancelled or fails."""
    open_notices = IdleNotice.objects.filter(
        kind=IdleNotice.Kind.SUSPENDED, resolved_at__isnull=True
    ).exclude(workload__state=wl.SUSPENDED)
    for notice in open_notices.select_related("workload"):
        notice.resolved_at = min(now, max(notice.created_at, notice.workload.updated_at))
        notice.save(update_fields=["resolved_at"])


def idle_notice_dismiss(*, notice: IdleNotice) -> None:
    IdleNotice.objects.filter(pk=notice.pk, resolved_at__isnull=True).update(
        resolved_at=timezone.now()
    )


# --- node health -------------------------------------------------------------------------

HEALTH_METRICS = (
    core.GPU_TEMP,
    core.POWER_USAGE,
    core.XID_ERRORS,
    core.ECC_SBE_TOTAL,
    core.ECC_DBE_TOTAL,
    core.FB_USED,
    core.FB_FREE,
)


def node_health_store(
    nodes: Mapping[str, core.NodeHealth], *, now: datetime | None = None
) -> list[NodeHealthReport]:
    """Judge and store each node's report, against the inventory's GPU count where known; the
    verdict goes onto the inventory's node too (a failed one gets no new placements)."""
    moment = now or timezone.now()
    inventory = {n.name: n for n in ClusterNode.objects.filter(name__in=list(nodes))}
    stored = []
    for hostname, node in nodes.items():
        known = inventory.get(hostname)
        expected = known.gpu_count if known is not None and known.gpu_count else None
        core.health_verdict(node, expected_gpus=expected)
        report, _ = NodeHealthReport.objects.update_or_create(
            hostname=hostname,
            defaults={
                "cluster_node": known,
                "source": node.source,
                "gpu_count": len(node.gpus),
                "expected_gpu_count": expected,
                "models_seen": node.models[:300],
                "driver_version": node.driver_version[:64],
                "memory_mib": max((g.memory_mib for g in node.gpus), default=0),
                "max_temperature_c": max(
                    (g.temperature_c for g in node.gpus if g.temperature_c is not None),
                    default=None,
                ),
                "ecc_single_bit": sum(g.ecc_sbe for g in node.gpus),
                "ecc_double_bit": sum(g.ecc_dbe for g in node.gpus),
                "xid_errors": [{"gpu": g.index, "xid": g.xid} for g in node.gpus if g.xid],
                "gpus": [g.as_dict() for g in node.gpus],
                "verdict": node.verdict,
                "problems": node.problems,
                "reported_as": node.reported_as,
                "reported_at": moment,
            },
        )
        if known is not None:
            # The scheduler reads the verdict from the inventory: a failed node takes no work.
            ClusterNode.objects.filter(pk=known.pk).update(
                health_verdict=node.verdict, health_problems=node.problems[:20]
            )
        stored.append(report)
    return stored


def node_health_refresh(*, client: PrometheusClient | None = None) -> list[NodeHealthReport]:
    """Read every node's latest GPU metrics from Prometheus and store its health report, under
    the node's name as the cluster gives it (:func:`node_resolver`)."""
    own_client = client is None
    prometheus = client or default_client()
    try:
        names = "|".join(HEALTH_METRICS)
        result = prometheus.query(f'{{__name__=~"{names}"}}')
        exporters = exporter_targets(prometheus)
    finally:
        if own_client:
            prometheus.close()
    samples = [
        core.Sample(
            str(item["metric"].get("__name__", "")), item["metric"], float(item["value"][1])
        )
        for item in result
    ]
    resolver = node_resolver()
    return node_health_store(
        core.node_health_from_samples(samples, resolver=resolver, exporters=exporters)
    )
