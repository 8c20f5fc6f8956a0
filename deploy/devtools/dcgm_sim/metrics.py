"""What a scrape says: each pod's utilisation from its profile, and the exposition in
dcgm-exporter's metric names and labels for each exporter variant."""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Mapping, Sequence

from deploy.devtools.dcgm_sim.cluster import Holding, Node, Pod
from deploy.devtools.dcgm_sim.exporters import DEFAULT_EXPORTER, EXPORTERS, HELP, ExporterProfile


def _hash(*parts: object) -> int:
    digest = hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()
    return int(digest[:8], 16)


def utilisation_percent(pod: Pod, now: float) -> float:
    """The pod's GPU utilisation (percent of what it holds) at ``now``; deterministic."""
    if pod.profile == "idle":
        return float(_hash(pod.uid, int(now // 5)) % 3)
    if pod.profile == "bursty":
        period = pod.period or 60.0
        phase = _hash(pod.uid, "phase") % int(max(1, period))
        on = int((now + phase) // (period / 2)) % 2 == 0
        return 95.0 if on else 1.0
    if pod.profile == "ramping":
        period = pod.period or 600.0
        start = pod.started if pod.started is not None else now
        return round(100.0 * max(0.0, min(1.0, (now - start) / period)), 2)
    return float(90 + _hash(pod.uid, int(now // 5)) % 11)


# --- exposition ----------------------------------------------------------------------------


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(values: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_escape(v)}"' for k, v in values.items())


def exporter_pod_name(node: str) -> str:
    """The name an exporter DaemonSet's pod on ``node`` would have when none is known."""
    return f"nvidia-dcgm-exporter-{hashlib.sha256(node.encode()).hexdigest()[:5]}"


def _unmeasured(exporter: ExporterProfile, node: str) -> bool:
    return any(fnmatch.fnmatchcase(node, pattern) for pattern in exporter.unmeasured)


def render(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    held: Mapping[str, list[Holding]],
    now: float,
    *,
    exporter: ExporterProfile | None = None,
    exporter_pods: Mapping[str, str] | None = None,
) -> str:
    """The /metrics text for the nodes and pods at ``now``, as ``exporter`` would write it
    (default: the project's agent). ``exporter_pods``: node → name of the exporter pod on it."""
    profile = exporter or EXPORTERS[DEFAULT_EXPORTER]
    by_device: dict[tuple[str, int, str], list[tuple[Pod, float]]] = {}
    pods_by_uid = {p.uid: p for p in pods}
    for uid, holdings in held.items():
        pod = pods_by_uid.get(uid)
        if pod is None:
            continue
        for holding in holdings:
            by_device.setdefault(holding.device.key, []).append((pod, holding.share))
    rows: dict[str, list[str]] = {name: [] for name in HELP}
    for node in nodes:
        unmeasured = _unmeasured(profile, node.name)
        host = node.name
        if profile.host_is_exporter_pod:
            host = (exporter_pods or {}).get(node.name) or exporter_pod_name(node.name)
        for device in node.devices:
            holders = by_device.get(device.key, [])
            shared = device.slots > 1 or len(holders) > 1
            percent_by_pod = [(p, s, utilisation_percent(p, now)) for p, s in holders]
            device_percent = min(100.0, sum(s * u for _, s, u in percent_by_pod))
            base = {"gpu": str(device.index), "UUID": device.uuid}
            if profile.pci_bus_id:
                base["pci_bus_id"] = f"00000000:{0x18 + device.index:02X}:00.0"
            base["device"] = f"nvidia{device.index}"
            base["modelName"] = node.model
            if profile.host_label:
                base[profile.host_label] = host
            if profile.driver_label:
                base["DCGM_FI_DRIVER_VERSION"] = node.driver
            if device.instance:
                base["GPU_I_PROFILE"] = device.profile
                base["GPU_I_ID"] = (
                    device.placed_id if profile.mig_ids == "placement" else device.instance
                )
            idle_mem = 0.2 if holders else 0.0
            used_mem = device.memory_mib * min(1.0, idle_mem + 0.6 * device_percent / 100)
            free_mem = max(0.0, device.memory_mib - used_mem)
            power = 60 + (node.max_power_w - 60) * device_percent / 100
            temperature = 30 + 0.4 * device_percent
            series: list[tuple[dict[str, str], float, float, float]] = []
            if not holders:
                unowned = dict(base)
                if profile.unowned == "empty":
                    unowned.update({"container": "", "namespace": "", "pod": ""})
                series.append((unowned, 0, 0, 0))
            elif shared and profile.accounting_label:
                for pod, share, percent in percent_by_pod:
                    labels = {
                        **base,
                        "container": pod.container,
                        "namespace": pod.namespace,
                        "pod": pod.name,
                        "accounting": "pod",
                    }
                    pod_mem = device.memory_mib * share * (0.2 + 0.6 * percent / 100)
                    series.append((labels, share * percent, pod_mem, percent))
            elif shared:
                # dcgm-exporter: every pod's series repeats the device's values.
                for pod, _share, _percent in percent_by_pod:
                    labels = {
                        **base,
                        "container": pod.container,
                        "namespace": pod.namespace,
                        "pod": pod.name,
                    }
                    series.append((labels, device_percent, used_mem, device_percent))
            else:
                pod, _share, percent = percent_by_pod[0]
                labels = {
                    **base,
                    "container": pod.container,
                    "namespace": pod.namespace,
                    "pod": pod.name,
                }
                series.append((labels, percent, used_mem, percent))
            for labels, gpu_percent, mem, own_percent in series:
                text = _labels(labels)
                util = 0.0 if device.instance else gpu_percent
                active = (own_percent if device.instance else gpu_percent) / 100
                if not unmeasured and (profile.mig_util or not device.instance):
                    rows["DCGM_FI_DEV_GPU_UTIL"].append(f"DCGM_FI_DEV_GPU_UTIL{{{text}}} {util:g}")
                rows["DCGM_FI_DEV_FB_USED"].append(f"DCGM_FI_DEV_FB_USED{{{text}}} {mem:.0f}")
                rows["DCGM_FI_DEV_FB_FREE"].append(f"DCGM_FI_DEV_FB_FREE{{{text}}} {free_mem:.0f}")
                if profile.profiling and not unmeasured:
                    rows["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(
                        f"DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{text}}} {active:.4f}"
                    )
                if profile.profiling:
                    rows["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"].append(
                        f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{text}}} {active * 0.6:.4f}"
                    )
                if not device.instance:  # per-GPU fields, not per instance
                    rows["DCGM_FI_DEV_POWER_USAGE"].append(
                        f"DCGM_FI_DEV_POWER_USAGE{{{text}}} {power:.3f}"
                    )
                    rows["DCGM_FI_DEV_GPU_TEMP"].append(
                        f"DCGM_FI_DEV_GPU_TEMP{{{text}}} {temperature:.0f}"
                    )
                rows["DCGM_FI_DEV_XID_ERRORS"].append(f"DCGM_FI_DEV_XID_ERRORS{{{text}}} 0")
                rows["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"].append(
                    f"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{{{text}}} 0"
                )
                rows["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].append(
                    f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{text}}} 0"
                )
    out: list[str] = []
    for name, (kind, text) in HELP.items():
        if not rows[name]:
            continue  # a family the exporter does not emit at all
        out.append(f"# HELP {name} {text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(rows[name])
    return "\n".join(out) + "\n"
