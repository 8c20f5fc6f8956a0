"""NVML readings → dcgm-exporter's metric names and labels, and the node's health report."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from apps.telemetry import core
from apps.telemetry.agent.nvml import Nvml
from apps.telemetry.agent.pods import NoPods, PodRef, PodResolver

EXPORTER = "gpupaas-agent"
HELP = {
    core.GPU_UTIL: ("gauge", "GPU utilization (in %)."),
    core.FB_USED: ("gauge", "Framebuffer memory used (in MiB)."),
    core.FB_FREE: ("gauge", "Framebuffer memory free (in MiB)."),
    core.GR_ENGINE_ACTIVE: ("gauge", "Ratio of time the GPU is busy (NVML utilisation / 100)."),
    core.POWER_USAGE: ("gauge", "Power draw (in W)."),
    core.GPU_TEMP: ("gauge", "GPU temperature (in C)."),
    core.XID_ERRORS: ("gauge", "Value of the last XID error encountered."),
    core.ECC_SBE_TOTAL: ("counter", "Total number of single-bit volatile ECC errors."),
    core.ECC_DBE_TOTAL: ("counter", "Total number of double-bit volatile ECC errors."),
}


@dataclass
class Row:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Collector:
    nvml: Nvml
    hostname: str
    resolver: PodResolver = field(default_factory=NoPods)
    last_xid: dict[int, int] = field(default_factory=dict)

    def rows(self) -> list[Row]:
        for index, xid in self.nvml.xid_events():
            self.last_xid[index] = xid
        driver = self.nvml.driver_version()
        rows: list[Row] = []
        for index in range(self.nvml.device_count()):
            base = {
                "gpu": str(index),
                "UUID": self.nvml.uuid(index),
                "pci_bus_id": self.nvml.pci_bus_id(index),
                "device": f"nvidia{index}",
                "modelName": self.nvml.name(index),
                "Hostname": self.hostname,
                "DCGM_FI_DRIVER_VERSION": driver,
                "exporter": EXPORTER,
            }
            memory = self.nvml.memory(index)
            util = float(self.nvml.utilisation_percent(index))
            power = self.nvml.power_watts(index)
            temperature = self.nvml.temperature_c(index)
            sbe, dbe = self.nvml.ecc_errors(index)
            by_pod: dict[PodRef, list[int]] = defaultdict(list)
            memory_of: dict[PodRef, int] = defaultdict(int)
            for process in self.nvml.processes(index):
                pod = self.resolver.pod_of(process.pid)
                if pod is not None:
                    by_pod[pod].append(process.pid)
                    memory_of[pod] += process.used_mib
            series: list[tuple[dict[str, str], float, float]] = []
            if not by_pod:
                labels = {**base, "container": "", "namespace": "", "pod": ""}
                series.append((labels, util, float(memory.used_mib)))
            elif len(by_pod) == 1:
                (pod,) = by_pod
                series.append((self._pod_labels(base, pod), util, float(memory.used_mib)))
            else:
                # A shared GPU: each pod's own SM time (per-process accounting) and memory.
                sm = self.nvml.process_sm_percent(index)
                for pod, pids in sorted(
                    by_pod.items(), key=lambda kv: (kv[0].namespace, kv[0].pod)
                ):
                    if sm:
                        own = min(100.0, float(sum(sm.get(pid, 0) for pid in pids)))
                    else:
                        share = memory_of[pod] / max(1, sum(memory_of.values()))
                        own = util * share
                    labels = {**self._pod_labels(base, pod), core.ACCOUNTING_LABEL: "pod"}
                    series.append((labels, own, float(memory_of[pod])))
            for labels, percent, used in series:
                rows += [
                    Row(core.GPU_UTIL, labels, percent),
                    Row(core.FB_USED, labels, used),
                    Row(core.FB_FREE, labels, float(memory.free_mib)),
                    Row(core.GR_ENGINE_ACTIVE, labels, percent / 100),
                    Row(core.XID_ERRORS, labels, float(self.last_xid.get(index, 0))),
                    Row(core.ECC_SBE_TOTAL, labels, float(sbe)),
                    Row(core.ECC_DBE_TOTAL, labels, float(dbe)),
                ]
                if power is not None:
                    rows.append(Row(core.POWER_USAGE, labels, power))
                if temperature is not None:
                    rows.append(Row(core.GPU_TEMP, labels, float(temperature)))
        return rows

    @staticmethod
    def _pod_labels(base: dict[str, str], pod: PodRef) -> dict[str, str]:
        return {**base, "container": pod.container, "namespace": pod.namespace, "pod": pod.pod}

    def exposition(self) -> str:
        by_name: dict[str, list[Row]] = defaultdict(list)
        for row in self.rows():
            by_name[row.name].append(row)
        out: list[str] = []
        for name, (kind, text) in HELP.items():
            out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            for row in by_name.get(name, []):
                labels = ",".join(f'{k}="{_escape(v)}"' for k, v in row.labels.items())
                out.append(f"{name}{{{labels}}} {row.value:g}")
        return "\n".join(out) + "\n"

    def health(self) -> core.NodeHealth:
        """The node's inventory and health, judged on its own (the portal adds its inventory)."""
        samples = [core.Sample(r.name, r.labels, r.value) for r in self.rows()]
        node = core.node_health_from_samples(samples).get(
            self.hostname, core.NodeHealth(self.hostname, EXPORTER, [])
        )
        for index in range(self.nvml.device_count()):
            total = self.nvml.memory(index).total_mib
            for gpu in node.gpus:
                if gpu.index == str(index):
                    gpu.memory_mib = total
        return core.health_verdict(node)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
