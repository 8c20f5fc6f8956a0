"""Per-workload usage from readings, on plain data: shared GPUs split between their pods,
overlap of a holding with a window, the price of GPU time, and the PromQL of one accounting pass."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

from apps.telemetry.core.samples import (
    ACCOUNTING_LABEL,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    GpuReading,
    clamp,
)

# --- joining to workloads and splitting shared GPUs --------------------------------------


@dataclass(frozen=True)
class PodAllocation:
    """A pod of a workload and the GPU it was allocated (in GPUs: 0.25, 1, 8 …)."""

    workload_id: int
    gpus: float


@dataclass
class WorkloadMeasure:
    """What the exporters say about one workload's GPUs over a window."""

    workload_id: int
    allocated_gpus: float = 0.0  # of the pods that were reported
    used_gpus: float = 0.0
    series: int = 0

    @property
    def utilisation(self) -> float | None:
        if self.allocated_gpus <= 0:
            return None
        return clamp(self.used_gpus / self.allocated_gpus)


def measure_workloads(
    readings: Iterable[GpuReading], pods: Mapping[tuple[str, str], PodAllocation]
) -> dict[int, WorkloadMeasure]:
    """Per workload, the GPUs its pods were reported on and how much of them they used.

    ``pods`` maps (namespace, pod name) to the allocation of that pod. A series naming a pod
    that is not in ``pods`` credits nobody.
    """
    by_device: dict[tuple[str, str, str], list[GpuReading]] = defaultdict(list)
    devices_of_pod: dict[tuple[str, str], set[tuple[str, str, str]]] = defaultdict(set)
    for reading in readings:
        series = reading.series
        if not series.pod or reading.utilisation is None:
            continue
        by_device[series.device_key].append(reading)
        devices_of_pod[series.pod_key].add(series.device_key)

    result: dict[int, WorkloadMeasure] = {}
    for device_readings in by_device.values():
        # One share per pod on this device: its allocation spread over the devices it holds.
        shares: dict[tuple[str, str], float] = {}
        for reading in device_readings:
            key = reading.series.pod_key
            allocation = pods.get(key)
            if allocation is not None:
                # A pod holds at most one whole device, whatever it was allocated in all.
                shares[key] = min(1.0, allocation.gpus / max(1, len(devices_of_pod[key])))
        known = list(shares.values())
        unknown = {r.series.pod_key for r in device_readings} - shares.keys()
        # Pods we cannot attribute still hold a part of a shared GPU: assume a typical share.
        total_share = sum(known) + len(unknown) * (sum(known) / len(known) if known else 0)
        for reading in device_readings:
            key = reading.series.pod_key
            if key not in shares:
                continue
            share = shares[key]
            value = reading.utilisation or 0.0
            if reading.series.is_mig:
                used = value * share  # the engine activity is relative to the instance
            elif reading.series.per_pod:
                used = min(share, value)  # the pod's own fraction of the whole GPU
            else:
                used = min(share, value * share / total_share) if total_share > 0 else 0.0
            measure = result.setdefault(
                pods[key].workload_id, WorkloadMeasure(pods[key].workload_id)
            )
            measure.allocated_gpus += share
            measure.used_gpus += used
            measure.series += 1
    return result


# --- accounting ---------------------------------------------------------------------------


def overlap_seconds(
    started_at: datetime | None,
    finished_at: datetime | None,
    window_start: datetime,
    window_end: datetime,
) -> float:
    """Seconds of [window_start, window_end) during which a workload held its GPUs."""
    if started_at is None:
        return 0.0
    start = max(started_at, window_start)
    end = min(finished_at or window_end, window_end)
    return max(0.0, (end - start).total_seconds())


def price(gpu_seconds: float, hourly_cost: Decimal) -> Decimal:
    cost = Decimal(str(gpu_seconds)) / Decimal(3600) * hourly_cost
    return cost.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


# The labels accounting reads; the others (model, driver, PCI id, scrape target…) are dropped
# in PromQL so that a cycle over thousands of GPUs moves a fraction of the bytes.
ACCOUNTING_LABELS = (
    "Hostname",
    "hostname",
    "UUID",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "namespace",
    "pod",
    "exported_namespace",
    "exported_pod",
    ACCOUNTING_LABEL,
)
# The scrape targets' own (namespace, pod): their labels on a series mean "no pod".
EXPORTER_TARGETS_QUERY = 'group by (namespace, pod) (up{pod!=""})'


def exporter_targets(result: Iterable[Mapping[str, object]]) -> frozenset[tuple[str, str]]:
    """(namespace, pod) of each scrape target, from the result of
    :data:`EXPORTER_TARGETS_QUERY`."""
    targets = set()
    for item in result:
        metric = dict(item.get("metric") or {})  # type: ignore[call-overload]
        pod = str(metric.get("pod") or "")
        if pod:
            targets.add((str(metric.get("namespace") or ""), pod))
    return frozenset(targets)


def accounting_queries(window_seconds: int) -> dict[str, str]:
    """Instant PromQL queries for one accounting window: each series' average over the window,
    reduced to the labels accounting needs (duplicates from two scrapes of one GPU merge)."""
    window = f"{max(1, int(window_seconds))}s"
    keep = ", ".join(ACCOUNTING_LABELS)
    return {
        name: f"max by ({keep}) (avg_over_time({name}[{window}]))"
        for name in (GPU_UTIL, GR_ENGINE_ACTIVE)
    }


def pod_series_selectors(metric: str, namespace: str, pods: Sequence[str]) -> str:
    """PromQL for a metric of some pods of a namespace, with and without relabelled labels."""
    names = "|".join(sorted(pods)) or "^$"
    return (
        f'{metric}{{exported_namespace="{namespace}",exported_pod=~"{names}"}} or '
        f'{metric}{{namespace="{namespace}",pod=~"{names}",exported_pod=""}}'
    )
