"""The platform's own state as Prometheus metrics on the portal's /metrics (read from the
database at each scrape, a handful of aggregate queries): what the alerting rules in
deploy/prometheus/alerts.yml and the chart's Grafana dashboard watch.

* ``gpupaas_quota_limit_gpus`` / ``gpupaas_quota_used_gpus`` {team, gpu_class}: a team's
  limit and what its admitted, starting and running workloads are charged, in GPUs.
* ``gpupaas_queued_workloads`` / ``gpupaas_queue_wait_seconds_max`` {gpu_class,
  priority_class}: how many wait in the queue and for how long the oldest has waited.
* ``gpupaas_idle_cost_per_hour`` {team, gpu_class}: the hourly cost of GPUs held by
  workloads the telemetry found idle (``idle_since`` set).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterator
from decimal import Decimal

from django.db import DatabaseError
from django.db.models import Count, F, Min, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import REGISTRY, Collector

from apps.quotas.models import TeamQuota
from apps.workloads import core as wl
from apps.workloads.models import Workload

log = logging.getLogger(__name__)


NAMES = (
    "gpupaas_quota_limit_gpus",
    "gpupaas_quota_used_gpus",
    "gpupaas_queued_workloads",
    "gpupaas_queue_wait_seconds_max",
    "gpupaas_idle_cost_per_hour",
)


class PlatformCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The names, without touching the database (the registry asks at registration,
        when the process starts)."""
        for name in NAMES:
            yield GaugeMetricFamily(name, "")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            yield from self._collect()
        except DatabaseError as exc:  # a scrape never fails the portal; the gap shows
            log.warning("platform metrics unavailable: %s", exc)

    def _collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["team", "gpu_class"]
        limit = GaugeMetricFamily(
            "gpupaas_quota_limit_gpus", "Team quota limit (GPUs).", labels=labels
        )
        used = GaugeMetricFamily(
            "gpupaas_quota_used_gpus", "GPUs charged to a team's active workloads.", labels=labels
        )
        charged: dict[tuple[str, str], float] = defaultdict(float)
        active = Workload.objects.units().filter(state__in=wl.ACTIVE_STATES)
        rows = active.values("team__slug", "gpu_class__name").annotate(
            milli=Sum(F("charged_milli") * F("replicas"))
        )
        for row in rows:
            charged[(row["team__slug"], row["gpu_class__name"])] += float(row["milli"] or 0) / 1000
        quotas = TeamQuota.objects.values_list("team__slug", "gpu_class__name", "limit_milli")
        for team, gpu_class, limit_milli in quotas:
            limit.add_metric([team, gpu_class], limit_milli / 1000)
            used.add_metric([team, gpu_class], charged.pop((team, gpu_class), 0.0))
        for (team, gpu_class), gpus in charged.items():  # active without a quota row
            used.add_metric([team, gpu_class], gpus)
        yield limit
        yield used

        qlabels = ["gpu_class", "priority_class"]
        queued = GaugeMetricFamily(
            "gpupaas_queued_workloads", "Workloads waiting in the queue.", labels=qlabels
        )
        wait = GaugeMetricFamily(
            "gpupaas_queue_wait_seconds_max",
            "How long the oldest queued workload has waited (seconds).",
            labels=qlabels,
        )
        now = timezone.now()
        waiting = Workload.objects.units().filter(state=wl.QUEUED)
        for row in waiting.values("gpu_class__name", "priority_class").annotate(
            n=Count("id"), oldest=Min(Coalesce("queued_at", "created_at"))
        ):
            key = [row["gpu_class__name"], row["priority_class"]]
            queued.add_metric(key, row["n"])
            wait.add_metric(key, max(0.0, (now - row["oldest"]).total_seconds()))
        yield queued
        yield wait

        idle = GaugeMetricFamily(
            "gpupaas_idle_cost_per_hour",
            "Hourly cost of the GPUs held by workloads found idle.",
            labels=labels,
        )
        idle_rows = (
            active.filter(usage__idle_since__isnull=False)
            .values("team__slug", "gpu_class__name", "gpu_class__hourly_cost")
            .annotate(milli=Sum(F("charged_milli") * F("replicas")))
        )
        for row in idle_rows:
            cost = Decimal(row["milli"] or 0) / 1000 * (row["gpu_class__hourly_cost"] or 0)
            idle.add_metric([row["team__slug"], row["gpu_class__name"]], float(cost))
        yield idle


_registered = False


def register() -> None:
    """Add the collector to the default registry (the one /metrics exports), once."""
    global _registered
    if not _registered:
        REGISTRY.register(PlatformCollector())
        _registered = True
