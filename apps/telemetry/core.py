"""Pure telemetry rules on plain data: DCGM series → readings → per-workload usage; shared GPUs
split per pod; idle decisions; node health verdicts. No ORM, no HTTP.

What real exporters emit, and how it is read here:

* dcgm-exporter labels a series with ``gpu``, ``UUID``, ``device``, ``modelName``,
  ``Hostname`` (``hostname`` from 4.6), ``DCGM_FI_DRIVER_VERSION``, and in Kubernetes mode
  ``namespace``/``pod``/``container`` of the pod holding the GPU. When Prometheus scrapes the
  exporter with its own ``namespace``/``pod`` target labels (Kubernetes service discovery), the
  exporter's become ``exported_namespace``/``exported_pod``: when an ``exported_*`` label is
  present it is the workload's, even if empty.
* MIG instances carry ``GPU_I_ID``/``GPU_I_PROFILE`` and the parent GPU's ``UUID``; their
  ``DCGM_FI_DEV_GPU_UTIL`` is 0 (or absent) and ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a 0–1 ratio
  of the instance) is the measure.
* A GPU shared by several pods (time-slicing, HAMi) is reported once per pod. dcgm-exporter
  repeats the device's value on every pod's series: the device's use is then split between its
  pods in proportion to what each was allocated, never above that. Exporters that measure each
  pod's own share (this project's simulator and pynvml agent, from per-process accounting) say
  so with the label ``accounting="pod"``; each pod is then credited with its own value.
* A series is credited only to the workload whose pod it names, matched on namespace *and*
  pod name; the caller builds that index only from pods in the workload's team namespace, so
  one team is never credited with another team's pod.
* An unowned device: dcgm-exporter 3.x empties the pod labels, 4.x leaves them out; a
  Kubernetes scrape then gives the series the exporter pod's own ``namespace``/``pod`` target
  labels. A series whose namespace and pod are a scrape target's own (``exporters``) belongs to
  nobody.
* The host label may be ``Hostname``, ``hostname``, the exporter pod's name or absent: the node
  is resolved from the cluster (:class:`NodeResolver`): an inventory node of that name, the node
  the exporter pod of that name runs on, the node of the workload pod the series names, the node
  whose inventory lists the GPU's UUID — the label as it is only when none of these knows it.
* A GPU that exports neither ``DCGM_FI_DEV_GPU_UTIL`` nor ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` is
  unmeasured: its utilisation is ``None`` ("no data"), never 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"
ECC_SBE_TOTAL = "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"
ECC_DBE_TOTAL = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
# The metrics every exporter of this project emits (the simulator and the pynvml agent).
CORE_METRICS = (
    GPU_UTIL,
    FB_USED,
    FB_FREE,
    GR_ENGINE_ACTIVE,
    TENSOR_ACTIVE,
    POWER_USAGE,
    GPU_TEMP,
    XID_ERRORS,
)
ACCOUNTING_LABEL = "accounting"
ACCOUNTING_PER_POD = "pod"

# XIDs that mean the GPU or its memory is unhealthy (NVIDIA's XID catalogue: double-bit ECC,
# row-remapping failure, fallen off the bus, uncontained errors, GSP errors, …).
CRITICAL_XIDS = frozenset({48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
TEMPERATURE_WARN_C = 83.0
TEMPERATURE_FAIL_C = 90.0


# --- samples ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


def parse_exposition(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (a scrape of an exporter)."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples.append(Sample(s.name, dict(s.labels), float(s.value)))
    return samples


def samples_from_vector(name: str, result: Iterable[Mapping[str, object]]) -> list[Sample]:
    """Samples of a PromQL instant-vector result (``data.result`` of /api/v1/query)."""
    samples = []
    for item in result:
        metric = item.get("metric") or {}
        value = item.get("value") or (0, "nan")
        labels = {str(k): str(v) for k, v in dict(metric).items()}  # type: ignore[call-overload]
        samples.append(Sample(name, labels, float(value[1])))  # type: ignore[index]
    return samples


# --- series identity ----------------------------------------------------------------------


@dataclass(frozen=True)
class GpuSeries:
    """Who a series is about: a GPU (or MIG instance) on a host, and the pod holding it."""

    hostname: str
    uuid: str
    gpu: str
    instance: str = ""  # GPU_I_ID of a MIG instance, "" for a whole GPU
    profile: str = ""  # GPU_I_PROFILE, e.g. 1g.10gb
    model: str = ""
    driver: str = ""
    namespace: str = ""
    pod: str = ""
    container: str = ""
    per_pod: bool = False
    scrape_pod: str = ""  # the exporter's own pod (a Kubernetes scrape's ``pod`` target label)

    @property
    def device_key(self) -> tuple[str, str, str]:
        return (self.hostname, self.uuid, self.instance)

    @property
    def is_mig(self) -> bool:
        return bool(self.instance or self.profile)

    @property
    def pod_key(self) -> tuple[str, str]:
        return (self.namespace, self.pod)


def _pick(labels: Mapping[str, str], name: str) -> str:
    exported = f"exported_{name}"
    if exported in labels:
        return labels[exported]
    return labels.get(name, "")


def series_identity(
    labels: Mapping[str, str], exporters: frozenset[tuple[str, str]] = frozenset()
) -> GpuSeries:
    """Who a series is about. ``exporters``: (namespace, pod) of the scrape targets, whose own
    labels on a series mean "no pod" (dcgm-exporter 4.x leaves an unowned device's pod labels
    out, and the scrape adds the exporter's)."""
    hostname = labels.get("Hostname") or labels.get("hostname") or ""
    if not hostname:
        hostname = labels.get("exported_Hostname") or labels.get("exported_hostname") or ""
    namespace, pod = _pick(labels, "namespace"), _pick(labels, "pod")
    scrape_pod = labels.get("pod", "") if "exported_pod" in labels else ""
    if "exported_pod" not in labels and (namespace, pod) in exporters:
        namespace, pod, scrape_pod = "", "", pod
    return GpuSeries(
        hostname=hostname,
        uuid=labels.get("UUID") or labels.get("uuid") or "",
        gpu=labels.get("gpu", ""),
        instance=labels.get("GPU_I_ID", ""),
        profile=labels.get("GPU_I_PROFILE", ""),
        model=labels.get("modelName", ""),
        driver=labels.get("DCGM_FI_DRIVER_VERSION", ""),
        namespace=namespace,
        pod=pod,
        container=_pick(labels, "container") if pod else "",
        per_pod=labels.get(ACCOUNTING_LABEL) == ACCOUNTING_PER_POD,
        scrape_pod=scrape_pod,
    )


@dataclass(frozen=True)
class NodeResolver:
    """Which node a series is about, from what the cluster says (not the exporter's label
    alone): ``nodes`` the inventory's node names, ``exporter_pods`` exporter pod name → its
    node, ``pod_nodes`` (namespace, pod) → node of workload pods, ``uuid_nodes`` GPU UUID →
    node from the inventory."""

    nodes: frozenset[str] = frozenset()
    exporter_pods: Mapping[str, str] = field(default_factory=dict)
    pod_nodes: Mapping[tuple[str, str], str] = field(default_factory=dict)
    uuid_nodes: Mapping[str, str] = field(default_factory=dict)

    def node_of(self, series: GpuSeries) -> str:
        label = series.hostname
        if label and label in self.nodes:
            return label
        for exporter in (label, series.scrape_pod):
            if exporter and exporter in self.exporter_pods:
                return self.exporter_pods[exporter]
        if series.pod and series.pod_key in self.pod_nodes:
            return self.pod_nodes[series.pod_key]
        if series.uuid in self.uuid_nodes:
            return self.uuid_nodes[series.uuid]
        return label

    def resolve(self, series: GpuSeries) -> GpuSeries:
        node = self.node_of(series)
        return series if node == series.hostname else replace(series, hostname=node)


@dataclass
class GpuReading:
    """The metrics of one series identity (one GPU or MIG instance, as seen by one pod)."""

    series: GpuSeries
    values: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        value = self.values.get(name)
        if value is None or math.isnan(value):
            return None
        return value

    @property
    def utilisation(self) -> float | None:
        """0–1. MIG: the instance's graphics-engine activity; else GPU_UTIL (percent) / 100,
        falling back to the engine activity where an exporter has only profiling metrics."""
        active = self.get(GR_ENGINE_ACTIVE)
        if self.series.is_mig:
            return _clamp(active) if active is not None else None
        util = self.get(GPU_UTIL)
        if util is not None:
            return _clamp(util / 100)
        return _clamp(active) if active is not None else None


def _clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


def readings_from_samples(
    samples: Iterable[Sample],
    *,
    exporters: frozenset[tuple[str, str]] = frozenset(),
    resolver: NodeResolver | None = None,
) -> list[GpuReading]:
    """Group samples of the DCGM metrics by series identity (other metrics are ignored).
    ``exporters``: the scrape targets' (namespace, pod); ``resolver``: node names from the
    cluster (see :func:`series_identity`, :class:`NodeResolver`)."""
    readings: dict[GpuSeries, GpuReading] = {}
    for sample in samples:
        if not sample.name.startswith("DCGM_FI_"):
            continue
        identity = series_identity(sample.labels, exporters)
        if not identity.uuid:
            continue
        if resolver is not None:
            identity = resolver.resolve(identity)
        reading = readings.get(identity)
        if reading is None:
            reading = readings[identity] = GpuReading(identity)
        reading.values[sample.name] = sample.value
    return list(readings.values())


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
        return _clamp(self.used_gpus / self.allocated_gpus)


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


# --- idle decisions -----------------------------------------------------------------------

KIND_NOTEBOOK = "notebook"
FLAGGED_KINDS = frozenset({"training", "sweep"})


@dataclass(frozen=True)
class IdlePolicy:
    enabled: bool
    threshold: float  # 0–1
    warn_after: timedelta
    suspend_after: timedelta
    flag_after: timedelta


def with_idle_timeout(policy: IdlePolicy, *, kind: str, timeout_seconds: int | None) -> IdlePolicy:
    """The policy for one workload that has an idle timeout of its own (asked for in its
    request, or its team policy's default): a notebook is suspended after it (and warned no
    later), a training job or sweep flagged after it. Without one, the policy as it is."""
    if not timeout_seconds or timeout_seconds <= 0:
        return policy
    timeout = timedelta(seconds=timeout_seconds)
    if kind == KIND_NOTEBOOK:
        return replace(policy, suspend_after=timeout, warn_after=min(policy.warn_after, timeout))
    if kind in FLAGGED_KINDS:
        return replace(policy, flag_after=timeout)
    return policy


@dataclass(frozen=True)
class IdleState:
    idle_since: datetime | None = None
    warned_at: datetime | None = None
    flagged_at: datetime | None = None


@dataclass(frozen=True)
class IdleDecision:
    idle_since: datetime | None
    warn: bool = False
    suspend: bool = False
    flag: bool = False
    busy_again: bool = False  # the streak ended: open warnings and flags are resolved


def idle_decide(
    *,
    kind: str,
    utilisation: float | None,
    policy: IdlePolicy,
    state: IdleState,
    window_start: datetime,
    now: datetime,
) -> IdleDecision:
    """What the idle policy does after one window.

    No measurement means no idea: the streak ends and nothing is done (a notebook is never
    culled on missing data). A GPU at or above the threshold ends the streak. A notebook is
    warned once it has been idle for ``warn_after``, and suspended only after it was warned in
    an earlier window and has been idle for ``suspend_after``. Training jobs and sweeps are
    flagged once, after ``flag_after``. Other kinds (inference) are never acted on.
    """
    had_streak = state.idle_since is not None or state.warned_at or state.flagged_at
    if utilisation is None or utilisation >= policy.threshold:
        return IdleDecision(idle_since=None, busy_again=bool(had_streak))
    idle_since = state.idle_since or window_start
    idle_for = now - idle_since
    if not policy.enabled:
        return IdleDecision(idle_since=idle_since)
    if kind == KIND_NOTEBOOK:
        if state.warned_at is None:
            return IdleDecision(idle_since=idle_since, warn=idle_for >= policy.warn_after)
        suspend = idle_for >= policy.suspend_after and state.warned_at < now
        return IdleDecision(idle_since=idle_since, suspend=suspend)
    if kind in FLAGGED_KINDS and state.flagged_at is None:
        return IdleDecision(idle_since=idle_since, flag=idle_for >= policy.flag_after)
    return IdleDecision(idle_since=idle_since)


def describe_minutes(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} seconds"
    if seconds < 2 * 3600:
        return f"{seconds // 60} minutes"
    return f"{seconds / 3600:.1f} hours"


# --- node health --------------------------------------------------------------------------


@dataclass
class GpuHealth:
    index: str
    uuid: str
    model: str = ""
    driver: str = ""
    memory_mib: int = 0
    temperature_c: float | None = None
    power_w: float | None = None
    ecc_sbe: int = 0
    ecc_dbe: int = 0
    xid: int = 0

    def as_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "uuid": self.uuid,
            "model": self.model,
            "driver": self.driver,
            "memory_mib": self.memory_mib,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
            "ecc_sbe": self.ecc_sbe,
            "ecc_dbe": self.ecc_dbe,
            "xid": self.xid,
        }


@dataclass
class NodeHealth:
    hostname: str
    source: str
    gpus: list[GpuHealth]
    verdict: str = "ok"
    problems: list[str] = field(default_factory=list)
    reported_as: list[str] = field(default_factory=list)  # the exporter's own host labels

    @property
    def driver_version(self) -> str:
        return ", ".join(sorted({g.driver for g in self.gpus if g.driver}))

    @property
    def models(self) -> str:
        return ", ".join(sorted({g.model for g in self.gpus if g.model}))


def node_health_from_samples(
    samples: Iterable[Sample],
    *,
    resolver: NodeResolver | None = None,
    exporters: frozenset[tuple[str, str]] = frozenset(),
) -> dict[str, NodeHealth]:
    """One health record per node from the latest samples of its exporter (MIG rows fold into
    their parent GPU); the node as ``resolver`` names it from the cluster."""
    gpus: dict[tuple[str, str], GpuHealth] = {}
    memory: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(
        lambda: defaultdict(float)
    )
    sources: dict[str, str] = {}
    aliases: dict[str, set[str]] = defaultdict(set)
    for sample in samples:
        identity = series_identity(sample.labels, exporters)
        label = identity.hostname
        if resolver is not None:
            identity = resolver.resolve(identity)
        if not identity.uuid or not identity.hostname:
            continue
        if label and label != identity.hostname:
            aliases[identity.hostname].add(label)
        key = (identity.hostname, identity.uuid)
        health = gpus.get(key)
        if health is None:
            health = gpus[key] = GpuHealth(index=identity.gpu, uuid=identity.uuid)
        health.model = health.model or identity.model
        health.driver = health.driver or identity.driver
        sources.setdefault(identity.hostname, sample.labels.get("exporter", "dcgm-exporter"))
        value = sample.value
        if math.isnan(value):
            continue
        if sample.name == GPU_TEMP:
            health.temperature_c = value
        elif sample.name == POWER_USAGE:
            health.power_w = value
        elif sample.name == XID_ERRORS:
            health.xid = max(health.xid, int(value))
        elif sample.name == ECC_SBE_TOTAL:
            health.ecc_sbe = max(health.ecc_sbe, int(value))
        elif sample.name == ECC_DBE_TOTAL:
            health.ecc_dbe = max(health.ecc_dbe, int(value))
        elif sample.name in (FB_USED, FB_FREE):
            # used + free of one series is the memory it sees; the largest is the GPU's.
            memory[key][(identity.instance, identity.pod)] += value
    for key, parts in memory.items():
        per_instance: dict[str, float] = defaultdict(float)
        for (instance, _pod), value in parts.items():
            per_instance[instance] = max(per_instance[instance], value)
        # A MIG GPU's memory is the sum of its instances'.
        gpus[key].memory_mib = int(sum(per_instance.values()))
    return {
        host: NodeHealth(
            hostname=host,
            source=sources.get(host, "dcgm-exporter"),
            reported_as=sorted(aliases.get(host, ())),
            gpus=sorted(
                (g for (h, _), g in gpus.items() if h == host),
                key=lambda g: (len(g.index), g.index),
            ),
        )
        for host in sorted({h for h, _ in gpus})
    }


def health_verdict(node: NodeHealth, *, expected_gpus: int | None = None) -> NodeHealth:
    """Acceptance check of a node: ``failed`` blocks it, ``warning`` needs a look."""
    failed: list[str] = []
    warnings: list[str] = []
    if not node.gpus:
        failed.append("No GPU reported.")
    if expected_gpus is not None and len(node.gpus) != expected_gpus:
        failed.append(f"{len(node.gpus)} GPUs reported, the inventory expects {expected_gpus}.")
    drivers = {g.driver for g in node.gpus if g.driver}
    if len(drivers) > 1:
        warnings.append(f"Mixed driver versions: {', '.join(sorted(drivers))}.")
    models = {g.model for g in node.gpus if g.model}
    if len(models) > 1:
        warnings.append(f"Mixed GPU models: {', '.join(sorted(models))}.")
    for gpu in node.gpus:
        name = f"GPU {gpu.index} ({gpu.uuid})"
        if gpu.ecc_dbe:
            failed.append(f"{name}: {gpu.ecc_dbe} uncorrectable ECC errors.")
        if gpu.ecc_sbe:
            warnings.append(f"{name}: {gpu.ecc_sbe} corrected ECC errors.")
        if gpu.xid in CRITICAL_XIDS:
            failed.append(f"{name}: XID {gpu.xid}.")
        elif gpu.xid:
            warnings.append(f"{name}: XID {gpu.xid}.")
        if gpu.temperature_c is not None and gpu.temperature_c >= TEMPERATURE_FAIL_C:
            failed.append(f"{name}: {gpu.temperature_c:.0f} °C.")
        elif gpu.temperature_c is not None and gpu.temperature_c >= TEMPERATURE_WARN_C:
            warnings.append(f"{name}: {gpu.temperature_c:.0f} °C.")
    node.problems = failed + warnings
    node.verdict = "failed" if failed else "warning" if warnings else "ok"
    return node
