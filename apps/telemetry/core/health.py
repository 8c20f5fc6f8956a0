"""Node health verdicts on plain data: each GPU's health from its DCGM samples, and a node's
verdict against what its inventory expects."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from apps.telemetry.core.samples import (
    ECC_DBE_TOTAL,
    ECC_SBE_TOTAL,
    FB_FREE,
    FB_USED,
    GPU_TEMP,
    POWER_USAGE,
    XID_ERRORS,
    NodeResolver,
    Sample,
    series_identity,
)

# XIDs that mean the GPU or its memory is unhealthy (NVIDIA's XID catalogue: double-bit ECC,
# row-remapping failure, fallen off the bus, uncontained errors, GSP errors, …).
CRITICAL_XIDS = frozenset({48, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})
# XID 79: the GPU has fallen off the bus. Nothing runs on it any more, so the work placed there
# is moved off (NoExecute); a GPU failing another check only takes no new work (NoSchedule).
FELL_OFF_BUS_XIDS = frozenset({79})
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
TEMPERATURE_WARN_C = 83.0
TEMPERATURE_FAIL_C = 90.0

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


@dataclass(frozen=True)
class GpuFault:
    """One GPU that failed its health check: it takes no new work (``NoSchedule``), and with
    ``NoExecute`` (fallen off the bus) the work on it moves off. The rest of its node goes on."""

    uuid: str
    index: str
    effect: str
    reason: str
    code: str  # a short label value naming the cause: "xid-79", "ecc-dbe", "temperature"

    def as_dict(self) -> dict[str, str]:
        return {
            "uuid": self.uuid,
            "index": self.index,
            "effect": self.effect,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass
class NodeHealth:
    hostname: str
    source: str
    gpus: list[GpuHealth]
    verdict: str = "ok"
    problems: list[str] = field(default_factory=list)
    reported_as: list[str] = field(default_factory=list)  # the exporter's own host labels
    # Failures of the node as a whole (no GPU or fewer than expected reported): it takes no
    # work. Failures of single GPUs are ``gpu_faults``: only those GPUs stop taking work.
    node_failures: list[str] = field(default_factory=list)
    gpu_faults: list[GpuFault] = field(default_factory=list)

    @property
    def scheduling_verdict(self) -> str:
        """What the scheduler reads: ``failed`` (the node takes no work), ``degraded`` (some
        GPUs take none), else the report's own verdict."""
        if self.node_failures:
            return "failed"
        if self.gpu_faults:
            return "degraded"
        return self.verdict

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


def gpu_fault(gpu: GpuHealth) -> GpuFault | None:
    """The GPU's fault if it fails its health check, the worst cause first."""
    name = f"GPU {gpu.index} ({gpu.uuid})"
    if gpu.xid in FELL_OFF_BUS_XIDS:
        return GpuFault(
            gpu.uuid, gpu.index, NO_EXECUTE, f"{name} fell off the bus (XID {gpu.xid})", "xid-79"
        )
    if gpu.ecc_dbe:
        reason = f"{name}: {gpu.ecc_dbe} uncorrectable ECC errors"
        return GpuFault(gpu.uuid, gpu.index, NO_SCHEDULE, reason, "ecc-dbe")
    if gpu.xid in CRITICAL_XIDS:
        reason = f"{name}: XID {gpu.xid}"
        return GpuFault(gpu.uuid, gpu.index, NO_SCHEDULE, reason, f"xid-{gpu.xid}")
    if gpu.temperature_c is not None and gpu.temperature_c >= TEMPERATURE_FAIL_C:
        reason = f"{name}: {gpu.temperature_c:.0f} °C"
        return GpuFault(gpu.uuid, gpu.index, NO_SCHEDULE, reason, "temperature")
    return None


def health_verdict(node: NodeHealth, *, expected_gpus: int | None = None) -> NodeHealth:
    """Acceptance check of a node: ``failed`` blocks it, ``warning`` needs a look. A failure
    of one GPU fails the acceptance check too, but for scheduling it is that GPU's fault
    (``gpu_faults``), not the node's (``node_failures``)."""
    node_failures: list[str] = []
    failed: list[str] = []
    warnings: list[str] = []
    if not node.gpus:
        node_failures.append("No GPU reported.")
    if expected_gpus is not None and len(node.gpus) != expected_gpus:
        node_failures.append(
            f"{len(node.gpus)} GPUs reported, the inventory expects {expected_gpus}."
        )
    drivers = {g.driver for g in node.gpus if g.driver}
    if len(drivers) > 1:
        warnings.append(f"Mixed driver versions: {', '.join(sorted(drivers))}.")
    models = {g.model for g in node.gpus if g.model}
    if len(models) > 1:
        warnings.append(f"Mixed GPU models: {', '.join(sorted(models))}.")
    faults: list[GpuFault] = []
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
        fault = gpu_fault(gpu)
        if fault is not None:
            faults.append(fault)
    node.node_failures = node_failures
    node.gpu_faults = faults
    node.problems = node_failures + failed + warnings
    node.verdict = "failed" if node_failures or failed else "warning" if warnings else "ok"
    return node
