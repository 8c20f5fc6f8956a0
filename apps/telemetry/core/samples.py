"""DCGM series → readings, on plain data: the metric names read, the exposition and query
results parsed into samples, each series' identity (GPU, node, pod) and its reading.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

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
            return clamp(active) if active is not None else None
        util = self.get(GPU_UTIL)
        if util is not None:
            return clamp(util / 100)
        return clamp(active) if active is not None else None


def clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
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
