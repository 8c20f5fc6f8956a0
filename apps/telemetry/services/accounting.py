"""Accounting writes of an ingestion pass: GPU time allocated, used and priced per workload and
day, written in set-based statements."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Q

from apps.catalog.models import Cluster, GpuClass
from apps.telemetry import core
from apps.telemetry.models import (
    UsageDay,
    WorkloadUsage,
)
from apps.telemetry.services.idle import PolicyBook, _apply_idle_policy, _close_finished_suspensions
from apps.telemetry.services.records import (
    ACTED_KINDS,
    ENDED_HOLDING_STATES,
    HELD_FIELDS,
    USAGE_FIELDS,
    DayIncrement,
    Held,
    IngestResult,
    UsageState,
)
from apps.workloads import core as wl
from apps.workloads.models import Workload


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


def _usage_states(ids: list[int]) -> dict[int, UsageState]:
    rows = WorkloadUsage.objects.filter(workload_id__in=ids).values_list(
        "workload_id", *USAGE_FIELDS
    )
    return {row[0]: UsageState(*row) for row in rows}


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
    jupyter_activity = dict(
        WorkloadUsage.objects.filter(
            workload_id__in=[w.pk for w in workloads if w.kind == wl.KIND_NOTEBOOK],
            jupyter_last_activity__isnull=False,
        ).values_list("workload_id", "jupyter_last_activity")
    )
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
            activity_at = jupyter_activity.get(workload.pk)
            _apply_idle_policy(
                workload, usage, utilisation, activity_at, policies, window_start, now, result
            )
        elif workload.state != wl.RUNNING:
            usage.idle_since = usage.warned_at = usage.flagged_at = None
        usage_rows.append(usage)
    if connection.vendor == "postgresql":
        _write_postgresql(usage_rows, increments)
    else:
        _write_portable(usage_rows, increments)
    _close_finished_suspensions(now)


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
