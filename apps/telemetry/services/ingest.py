"""The ingestion pass: which pod belongs to which workload, the window's samples from
Prometheus, then accounting and the idle policy under the cursor's row lock."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.orchestration import cluster_reads
from apps.orchestration import manifests as m
from apps.orchestration.errors import ClusterError
from apps.orchestration.selectors import enabled_clusters
from apps.telemetry import core
from apps.telemetry.models import (
    IngestCursor,
)
from apps.telemetry.prom import PrometheusClient, default_client
from apps.telemetry.services.accounting import _account, _accounted_workloads
from apps.telemetry.services.idle import notebook_activity_refresh
from apps.telemetry.services.records import (
    IngestResult,
    PodIndex,
)
from apps.workloads.models import Workload

log = logging.getLogger(__name__)


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
            pods += cluster_reads.labelled_pods(cluster)
        except ClusterError as exc:
            log.warning("telemetry: pods of cluster %s unknown this cycle: %s", cluster.name, exc)
    return pod_index_build(pods, workloads)


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


def telemetry_ingest(
    *,
    now: datetime | None = None,
    client: PrometheusClient | None = None,
    pod_index: PodIndex | None = None,
) -> IngestResult:
    """One accounting and idle-policy pass over the window since the last one.

    Passes are serialised by a row lock on the cursor, so two beat ticks (or a slow pass and the
    next one) never count the same seconds twice. Running notebooks' Jupyter activity is read
    first (outside the lock: one HTTP round trip per notebook), so the idle policy weighs it.
    """
    result = IngestResult()
    own_client = client is None
    prometheus = client or default_client()
    timer = time.perf_counter()
    try:
        notebook_activity_refresh(now=now)
        result.timings["jupyter"] = time.perf_counter() - timer
        moment = now or timezone.now()
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
