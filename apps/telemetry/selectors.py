"""Telemetry reads: usage rollups per team, user and class, chargeback, the idle list, the heat
map and per-workload series. Accounting comes from the database; live views from Prometheus."""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.catalog.models import ClusterNode
from apps.common.parsing import parse_month
from apps.orchestration import reads
from apps.orchestration.errors import ClusterError
from apps.orchestration.selectors import enabled_clusters
from apps.telemetry import core
from apps.telemetry.models import IdleNotice, NodeHealthReport, UsageDay, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import workloads_visible_to

log = logging.getLogger(__name__)


def month_bounds(month: str | None, today: date | None = None) -> tuple[date, date]:
    """[first day, first day of next month) of ``YYYY-MM`` (default: this month). Raises
    ValueError, with a message for people, for anything else (``parse_month``)."""
    today = today or timezone.now().date()
    first = parse_month(month) if month else today.replace(day=1)
    following = (first + timedelta(days=32)).replace(day=1)
    return first, following


# --- usage over time ---------------------------------------------------------------------


@dataclass
class UsageSeries:
    days: list[date]
    classes: list[str]
    allocated: dict[str, list[float]]  # class → GPU-hours per day
    used: dict[str, list[float]]

    def chart(self) -> dict[str, Any]:
        epoch = [
            int(datetime.combine(d, datetime.min.time(), tzinfo=UTC).timestamp()) for d in self.days
        ]
        return {
            "x": epoch,
            "series": [
                {"label": f"{c} allocated", "values": self.allocated[c]} for c in self.classes
            ]
            + [{"label": f"{c} used", "values": self.used[c]} for c in self.classes],
        }


def usage_series(rows: QuerySet[UsageDay], start: date, end: date) -> UsageSeries:
    """GPU-hours allocated and used per day and GPU class, for [start, end)."""
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    position = {d: i for i, d in enumerate(days)}
    allocated: dict[str, list[float]] = {}
    used: dict[str, list[float]] = {}
    aggregated = (
        rows.filter(day__gte=start, day__lt=end)
        .values("day", "gpu_class__name")
        .annotate(a=Sum("allocated_gpu_seconds"), u=Sum("used_gpu_seconds"))
        .order_by()
    )
    for row in aggregated:
        name = row["gpu_class__name"]
        if name not in allocated:
            allocated[name] = [0.0] * len(days)
            used[name] = [0.0] * len(days)
        i = position[row["day"]]
        allocated[name][i] = round((row["a"] or 0) / 3600, 3)
        used[name][i] = round((row["u"] or 0) / 3600, 3)
    classes = sorted(allocated)
    return UsageSeries(days, classes, allocated, used)


@dataclass
class UsageTotal:
    key: str
    allocated_hours: float
    used_hours: float
    cost: Decimal
    label: str = ""
    gpu_class: str = ""
    team: str = ""
    unmeasured_hours: float = 0.0  # allocated without a measurement: no data

    @property
    def measured_hours(self) -> float:
        return max(0.0, self.allocated_hours - self.unmeasured_hours)

    @property
    def utilisation(self) -> float | None:
        """Used ÷ measured: hours without data are neither used nor idle; None without any."""
        measured = self.measured_hours
        return self.used_hours / measured if measured > 1e-9 else None


def usage_totals(
    rows: QuerySet[UsageDay], group: Sequence[str], start: date, end: date
) -> list[UsageTotal]:
    aggregated = (
        rows.filter(day__gte=start, day__lt=end)
        .values(*group)
        .annotate(
            a=Sum("allocated_gpu_seconds"),
            u=Sum("used_gpu_seconds"),
            n=Sum("unmeasured_gpu_seconds"),
            c=Sum("cost"),
        )
        .order_by(*group)
    )
    totals = []
    for row in aggregated:
        totals.append(
            UsageTotal(
                key="/".join(str(row[g]) for g in group),
                allocated_hours=(row["a"] or 0) / 3600,
                used_hours=(row["u"] or 0) / 3600,
                unmeasured_hours=(row["n"] or 0) / 3600,
                cost=Decimal(row["c"] or 0),
                label=str(row.get("owner__username", "")),
                gpu_class=str(row.get("gpu_class__name", "")),
                team=str(row.get("team__name", "")),
            )
        )
    return totals


def team_rows(team: Team) -> QuerySet[UsageDay]:
    return UsageDay.objects.filter(team=team)


def user_rows(user: User) -> QuerySet[UsageDay]:
    return UsageDay.objects.filter(owner=user)


CHARGEBACK_GROUP = ("team__name", "owner__username", "gpu_class__name")


def chargeback(teams: Iterable[Team], start: date, end: date) -> list[UsageTotal]:
    rows = UsageDay.objects.filter(team__in=list(teams))
    return usage_totals(rows, CHARGEBACK_GROUP, start, end)


# --- idle --------------------------------------------------------------------------------


def idle_workloads(user: User) -> QuerySet[Workload]:
    """Running workloads the user may see whose GPUs are idle now (longest idle first)."""
    return (
        workloads_visible_to(user)
        .filter(state=wl.RUNNING, usage__idle_since__isnull=False)
        .select_related("usage")
        .order_by("usage__idle_since")
    )


def open_notices_for(user: User) -> QuerySet[IdleNotice]:
    """Warnings and suspensions of the user's own workloads that still stand."""
    return (
        IdleNotice.objects.filter(workload__owner=user, resolved_at__isnull=True)
        .exclude(kind=IdleNotice.Kind.FLAGGED, workload__state__in=wl.TERMINAL_STATES)
        .select_related("workload")
    )


@dataclass
class Reclaimed:
    suspensions: int
    gpu_hours: float


def reclaimed(since: datetime | None = None, now: datetime | None = None) -> Reclaimed:
    """GPU-hours given back by idle suspensions (until resumed, or until now).

    With ``since`` the figure is the window's: every suspension in force at some moment
    after ``since`` counts, with only its hours after ``since``.
    """
    moment = now or timezone.now()
    notices = IdleNotice.objects.filter(kind=IdleNotice.Kind.SUSPENDED, created_at__lte=moment)
    if since is not None:
        notices = notices.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=since))
    total = sum(
        n.reclaimed_gpu_seconds(moment, since=since)
        for n in notices.only("kind", "created_at", "resolved_at", "allocated_gpus")
    )
    return Reclaimed(notices.count(), total / 3600)


# --- live views from Prometheus -----------------------------------------------------------


@dataclass
class HeatCell:
    label: str
    utilisation: float | None
    pods: list[str] = field(default_factory=list)
    workloads: list[tuple[int, str]] = field(default_factory=list)
    reported: bool = True  # False: in the inventory, but its exporter reports nothing

    @property
    def percent(self) -> int | None:
        return None if self.utilisation is None else round(self.utilisation * 100)

    @property
    def reading(self) -> str:
        """What the cell says: a percentage, or "no data" where the GPU exports no utilisation."""
        return "no data" if self.utilisation is None else f"{self.percent}%"

    @property
    def colour(self) -> str:
        """Grey when unallocated, hatched when unmeasured, red (idle) → green (busy) when
        allocated."""
        if not self.pods:
            return "#d0d7de"
        if self.utilisation is None:
            return "#8c959f"
        value = self.utilisation
        hue = round(120 * value)
        return f"hsl({hue} 70% 42%)"


@dataclass
class HeatNode:
    hostname: str
    model: str
    cells: list[HeatCell]


def node_resolver(*, with_cluster: bool = True) -> core.NodeResolver:
    """Node names as the cluster gives them: the inventory (names, GPU UUIDs), the nodes the
    exporter pods run on (read from the clusters when ``with_cluster``, else as last
    recorded by the node health reports)."""
    nodes: set[str] = set()
    uuids: dict[str, str] = {}
    for name, gpu_uuids in ClusterNode.objects.filter(cluster__enabled=True).values_list(
        "name", "gpu_uuids"
    ):
        nodes.add(name)
        for uuid in gpu_uuids or ():
            uuids[str(uuid)] = name
    exporters: dict[str, str] = {}
    for hostname, aliases in NodeHealthReport.objects.values_list("hostname", "reported_as"):
        for alias in aliases or ():
            exporters[str(alias)] = hostname
    pod_nodes: dict[tuple[str, str], str] = {}
    if with_cluster:
        for cluster in enabled_clusters():
            try:
                exporters.update(reads.exporter_pod_nodes(cluster))
                for pod in reads.labelled_pods(cluster):
                    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
                    if spec.get("nodeName"):
                        key = (str(meta.get("namespace")), str(meta.get("name")))
                        pod_nodes[key] = str(spec["nodeName"])
            except ClusterError as exc:
                log.warning("telemetry: pods of cluster %s unknown: %s", cluster.name, exc)
    return core.NodeResolver(frozenset(nodes), exporters, pod_nodes, uuids)


def heatmap(client: PrometheusClient, viewer: User) -> list[HeatNode]:
    """Every GPU (and MIG instance) by node, with its utilisation over the last minute ("no
    data" where it exports none) and the workloads on it that the viewer may open. Nodes are
    named as the cluster names them (the inventory and the last health reports)."""
    samples: list[core.Sample] = []
    # Memory is exported by every GPU and MIG instance: it lists the devices.
    for name in (core.GPU_UTIL, core.GR_ENGINE_ACTIVE, core.FB_USED):
        samples += core.samples_from_vector(name, client.query(f"avg_over_time({name}[1m])"))
    exporters = core.exporter_targets(client.query(core.EXPORTER_TARGETS_QUERY))
    readings = core.readings_from_samples(
        samples, exporters=exporters, resolver=node_resolver(with_cluster=False)
    )
    usages = WorkloadUsage.objects.filter(workload__state__in=(wl.STARTING, wl.RUNNING))
    pod_owner: dict[tuple[str, str], int] = {}
    for workload_id, pods in usages.values_list("workload_id", "pods"):
        for namespace, pod in pods or []:
            pod_owner[(namespace, pod)] = workload_id
    visible = dict(
        workloads_visible_to(viewer)
        .filter(pk__in=set(pod_owner.values()))
        .values_list("pk", "name")
    )
    devices: dict[tuple[str, str, str], HeatCell] = {}
    models: dict[str, str] = {}
    order: dict[tuple[str, str, str], tuple[int, int]] = {}
    for reading in readings:
        series = reading.series
        models.setdefault(series.hostname, series.model)
        key = series.device_key
        cell = devices.get(key)
        if cell is None:
            label = f"GPU {series.gpu}"
            if series.is_mig:
                label += f" · {series.profile or 'MIG'} · instance {series.instance or '?'}"
            cell = devices[key] = HeatCell(label=label, utilisation=None)
            order[key] = (_int(series.gpu), _int(series.instance))
        owner = pod_owner.get(series.pod_key)
        value = reading.utilisation
        if owner is None:
            # Not a workload's pod (or the exporter's own labels): the device's value only.
            if not cell.pods and value is not None:
                cell.utilisation = max(cell.utilisation or 0.0, value)
            continue
        cell.pods.append(series.pod)
        if series.per_pod and not series.is_mig:
            cell.utilisation = min(1.0, (cell.utilisation or 0.0) + (value or 0.0))
        elif value is not None:
            cell.utilisation = max(cell.utilisation or 0.0, value)
        if owner in visible:
            cell.workloads.append((owner, visible[owner]))
    # GPUs the inventory knows that no exporter reports: shown, as "no data".
    seen = {(host, uuid) for host, uuid, _ in devices}
    for name, uuids in ClusterNode.objects.filter(cluster__enabled=True).values_list(
        "name", "gpu_uuids"
    ):
        for index, uuid in enumerate(uuids or ()):
            if (name, str(uuid)) not in seen:
                key = (name, str(uuid), "")
                devices[key] = HeatCell(label=f"GPU {index}", utilisation=None, reported=False)
                order[key] = (index, 0)
    nodes: dict[str, list[tuple[tuple[int, int], HeatCell]]] = defaultdict(list)
    for key, cell in devices.items():
        nodes[key[0]].append((order[key], cell))
    return [
        HeatNode(host, models.get(host, ""), [c for _, c in sorted(cells, key=lambda x: x[0])])
        for host, cells in sorted(nodes.items())
    ]


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0


def workload_series(
    client: PrometheusClient, workload: Workload, *, now: datetime | None = None
) -> dict[str, Any]:
    """Utilisation (%) and memory (MiB) of a workload's GPUs over its run (at most 24 h)."""
    moment = now or timezone.now()
    usage = WorkloadUsage.objects.filter(workload=workload).first()
    pods = [pod for _, pod in (usage.pods if usage else [])]
    namespace = workload.team.namespace
    end = workload.finished_at or moment
    start = max(workload.started_at or end - timedelta(hours=1), end - timedelta(hours=24))
    if end - start < timedelta(minutes=5):
        start = end - timedelta(minutes=5)
    step = max(1.0, (end - start).total_seconds() / 400)
    result: dict[str, Any] = {"x": [], "utilisation": [], "memory_mib": []}
    if not pods:
        return result
    active = core.pod_series_selectors("gpupaas:gpu_active:ratio", namespace, pods)
    memory = core.pod_series_selectors(core.FB_USED, namespace, pods)
    # On a shared GPU each pod's series is its share of the whole GPU: show it relative to what
    # the workload was allocated, as accounting does.
    scale = 100.0
    if workload.gpu_class.sharing_mode in ("timeslice", "hami") and workload.charged_milli < 1000:
        scale = 100.0 * 1000 / workload.charged_milli
    util_rows = client.query_range(f"clamp_max(avg({active}) * {scale:g}, 100)", start, end, step)
    mem_rows = client.query_range(f"sum({memory})", start, end, step)
    points: dict[float, dict[str, float]] = defaultdict(dict)
    for name, rows in (("utilisation", util_rows), ("memory_mib", mem_rows)):
        for row in rows:
            for ts, value in row.get("values") or []:
                number = float(value)
                if not math.isnan(number):
                    points[float(ts)][name] = round(number, 2)
    for ts in sorted(points):
        result["x"].append(ts)
        result["utilisation"].append(points[ts].get("utilisation"))
        result["memory_mib"].append(points[ts].get("memory_mib"))
    return result


def usage_of(workload: Workload) -> WorkloadUsage | None:
    return WorkloadUsage.objects.filter(workload=workload).first()


def top_idle_cost(start: date, end: date, limit: int = 10) -> list[dict[str, Any]]:
    """Teams by GPU-hours measured but not used, for the admin's headline (hours without
    data are not idle)."""
    return list(
        UsageDay.objects.filter(day__gte=start, day__lt=end)
        .values("team__name")
        .annotate(
            idle=Sum(
                F("allocated_gpu_seconds") - F("unmeasured_gpu_seconds") - F("used_gpu_seconds")
            )
            / 3600
        )
        .order_by("-idle")[:limit]
    )
