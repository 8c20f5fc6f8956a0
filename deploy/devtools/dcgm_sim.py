"""A dcgm-exporter stand-in for kubesim's simulated GPUs (development and tests only).

It lists the GPU nodes of a cluster (GPU UUIDs and MIG devices from the node annotations
``kubesim.io/gpu-uuids`` and ``kubesim.io/mig-devices``) and the Running pods bound to them,
and serves ``/metrics`` in the Prometheus text format with dcgm-exporter's metric names and
labels (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``, ``container``/``namespace``/``pod`` of the pod holding the GPU or
MIG instance, ``GPU_I_PROFILE``/``GPU_I_ID`` for MIG)::

    python -m deploy.devtools.dcgm_sim --kubeconfig var/kubesim/admin.kubeconfig --port 9400

Which GPU a pod holds (kubesim has no device plugin, so the exporter decides, and remembers):

* the UUIDs of the pod's HAMi annotation ``nvidia.com/use-gpuuuid`` when present;
* otherwise, pods new to the exporter are taken in order of creation time (then uid), and each
  gets the lowest-index free devices of its node: whole GPUs for ``nvidia.com/gpu``, the first
  free instance of the profile (in ``kubesim.io/mig-devices`` order) for
  ``nvidia.com/mig-<profile>``, the lowest-index GPU with a free slice for each
  ``nvidia.com/gpu.shared`` (time-slicing), the lowest-index GPU with a free vGPU for HAMi.
  A pod keeps its devices until it is gone; devices never move between pods.

Utilisation follows the pod annotation ``kubesim.io/gpu-utilisation``, deterministic from the
time and the pod's uid (default ``busy``):

* ``busy``: 90–100 %; ``idle``: 0–2 %;
* ``bursty``: 95 % and 1 % alternating, half a period each (``kubesim.io/gpu-utilisation-period``,
  default 60s), phase from the uid;
* ``ramping``: from 0 at the pod's start to 100 % after the period (default 10m), then 100 %.

On a shared GPU (time-slicing, HAMi) every pod has its own series, carrying what that pod uses
(its profile × its share of the GPU) and the label ``accounting="pod"``, as the project's NVML
agent does from per-process accounting. MIG instances report ``DCGM_FI_DEV_GPU_UTIL`` 0 and
their activity in ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, as real MIG devices do.

Exporter variants (``--exporter NAME``; :data:`EXPORTERS`). ``agent`` is the project's pynvml
agent: every metric family, ``Hostname`` set to the node, per-pod series on shared GPUs with
``accounting="pod"``. The others reproduce what dcgm-exporter really emits:

* ``dcgm-3-h100`` (3.x): capitalised ``Hostname`` holding the node's name, ``pci_bus_id`` and
  the driver label, empty ``container``/``namespace``/``pod`` on unowned devices;
* ``dcgm-4-h100`` (4.x): lowercase ``hostname`` holding the name of the exporter's own pod (the
  pod labelled ``app=nvidia-dcgm-exporter`` on that node, if any), no ``pci_bus_id``, and no pod
  labels at all on unowned devices (so a Kubernetes scrape gives them the exporter pod's own
  ``namespace``/``pod`` target labels);
* ``dcgm-4-a30-mig`` (4.x on MIG nodes): no host label at all, MIG ``GPU_I_ID`` numbered as
  the driver numbers GPU instances (by placement: 1g at 7…, 2g at 3…, 3g at 1…), no GPU_UTIL on
  MIG devices;
* ``dcgm-3-rtx`` (3.x on workstation cards): no ``DCGM_FI_PROF_*`` family at all.

None of them has the ``accounting`` label or per-pod values on a shared GPU: every pod's series
repeats the device's value, as dcgm-exporter does. In every dcgm-exporter variant the GPUs of
the nodes matching ``unmeasured`` (default ``h100-3``) export neither
``DCGM_FI_DEV_GPU_UTIL`` nor ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a counter list without them),
only memory, power and health.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANNOTATION_PROFILE = "kubesim.io/gpu-utilisation"
ANNOTATION_PERIOD = "kubesim.io/gpu-utilisation-period"
ANNOTATION_HAMI_UUID = "nvidia.com/use-gpuuuid"
ANNOTATION_GPU_UUIDS = "kubesim.io/gpu-uuids"
ANNOTATION_MIG_DEVICES = "kubesim.io/mig-devices"
DEFAULT_PROFILE = "busy"
DEFAULT_DRIVER = "570.133.20"
PROFILES = ("busy", "idle", "bursty", "ramping")
EXPORTER_POD_LABEL = ("app", "nvidia-dcgm-exporter")
# GPU instance ids the driver gives MIG instances of a 7-slice GPU, by compute slices: the
# first id of each size (later ones of the same size follow it).
MIG_INSTANCE_BASE = {1: 7, 2: 3, 3: 1, 4: 0, 7: 0}


@dataclass(frozen=True)
class ExporterProfile:
    """How one exporter variant labels and fills its series."""

    name: str
    host_label: str = "Hostname"  # "Hostname", "hostname" or "" (none)
    host_is_exporter_pod: bool = False  # the host label holds the exporter pod's name
    unowned: str = "empty"  # "empty": empty pod labels; "omit": no pod labels
    accounting_label: bool = False  # per-pod values on shared GPUs, labelled accounting="pod"
    pci_bus_id: bool = True
    driver_label: bool = True
    profiling: bool = True  # the DCGM_FI_PROF_* families
    mig_util: bool = True  # GPU_UTIL (0) on MIG devices
    mig_ids: str = "ordinal"  # "ordinal": 1..n per GPU; "placement": the driver's ids
    unmeasured: tuple[str, ...] = ()  # node name patterns: no GPU_UTIL nor GR_ENGINE_ACTIVE


UNMEASURED_DEFAULT = ("h100-3",)
EXPORTERS: dict[str, ExporterProfile] = {
    p.name: p
    for p in (
        ExporterProfile("agent", accounting_label=True),
        ExporterProfile("dcgm-3-h100", mig_ids="placement", unmeasured=UNMEASURED_DEFAULT),
        ExporterProfile(
            "dcgm-4-h100",
            host_label="hostname",
            host_is_exporter_pod=True,
            unowned="omit",
            pci_bus_id=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
        ExporterProfile(
            "dcgm-4-a30-mig",
            host_label="",
            unowned="omit",
            mig_util=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
        ExporterProfile(
            "dcgm-3-rtx",
            profiling=False,
            pci_bus_id=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
    )
}
DEFAULT_EXPORTER = "agent"

HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
}


# --- the cluster as plain data ------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """A GPU, or a MIG instance of one, on a node."""

    node: str
    index: int
    uuid: str
    memory_mib: int
    slots: int = 1  # pods that can share it: time-slicing replicas, HAMi split count
    instance: str = ""
    profile: str = ""
    placed_id: str = ""  # the GPU instance id the driver would give it

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.node, self.index, self.instance)


@dataclass(frozen=True)
class Node:
    name: str
    model: str
    driver: str
    mode: str  # whole | time-slicing | mig | hami
    devices: tuple[Device, ...]
    gpu_uuids: tuple[str, ...]
    max_power_w: float


@dataclass(frozen=True)
class Pod:
    uid: str
    namespace: str
    name: str
    container: str
    node: str
    created: str
    started: float | None
    profile: str
    period: float | None
    resources: Mapping[str, int]
    pinned_uuids: tuple[str, ...] = ()


@dataclass
class Holding:
    device: Device
    share: float  # of the whole device


def _power_for(model: str) -> float:
    for key, watts in (("H100", 700.0), ("H200", 700.0), ("A100", 400.0), ("L40", 350.0)):
        if key in model:
            return watts
    return 300.0


def _mig_slices(profile: str) -> int:
    match = re.match(r"(\d+)g\.", profile)
    return int(match.group(1)) if match else 1


def _mig_memory_mib(profile: str, default: int) -> int:
    match = re.fullmatch(r"\d+g\.(\d+)gb", profile)
    return int(match.group(1)) * 1024 if match else default


def node_from_k8s(obj: Mapping[str, Any]) -> Node | None:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    try:
        uuids = tuple(json.loads(annotations.get(ANNOTATION_GPU_UUIDS) or "[]"))
    except ValueError:
        uuids = ()
    if not uuids:
        return None
    name = meta["name"]
    product = labels.get("nvidia.com/gpu.product", "NVIDIA-GPU")
    model = product.replace("-", " ")
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    driver = ".".join(p for p in parts if p) if parts[0] else DEFAULT_DRIVER
    memory = int(labels.get("nvidia.com/gpu.memory") or 0)
    mode = labels.get("kubesim.io/sharing-mode", "whole")
    replicas = int(labels.get("nvidia.com/gpu.replicas") or 1)
    devices: list[Device] = []
    if mode == "mig":
        try:
            mig = json.loads(annotations.get(ANNOTATION_MIG_DEVICES) or "[]")
        except ValueError:
            mig = []
        per_gpu: dict[int, int] = {}
        per_size: dict[tuple[int, int], int] = {}
        for entry in mig:
            gpu = int(entry["gpu"])
            profile = str(entry["profile"])
            per_gpu[gpu] = per_gpu.get(gpu, 0) + 1
            size = _mig_slices(profile)
            per_size[(gpu, size)] = per_size.get((gpu, size), 0) + 1
            placed = MIG_INSTANCE_BASE.get(size, 0) + per_size[(gpu, size)] - 1
            devices.append(
                Device(
                    node=name,
                    index=gpu,
                    uuid=uuids[gpu],
                    memory_mib=_mig_memory_mib(profile, memory),
                    instance=str(per_gpu[gpu]),
                    profile=profile,
                    placed_id=str(placed),
                )
            )
    else:
        slots = replicas if mode in ("time-slicing", "hami") else 1
        devices = [Device(name, i, u, memory, slots) for i, u in enumerate(uuids)]
    return Node(name, model, driver, mode, tuple(devices), uuids, _power_for(model))


def _duration_seconds(text: str | None) -> float | None:
    if not text:
        return None
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", text):
        total += float(number) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total or None


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def pod_from_k8s(obj: Mapping[str, Any]) -> Pod | None:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if status.get("phase") != "Running" or not spec.get("nodeName"):
        return None
    resources: dict[str, int] = {}
    for container in spec.get("containers") or []:
        limits = (container.get("resources") or {}).get("limits") or {}
        for key, value in limits.items():
            if key.startswith("nvidia.com/"):
                resources[key] = resources.get(key, 0) + _quantity(value)
    if not resources:
        return None
    annotations = meta.get("annotations") or {}
    started = status.get("startTime")
    started_ts = (
        datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() if started else None
    )
    profile = annotations.get(ANNOTATION_PROFILE, DEFAULT_PROFILE)
    pinned = tuple(u for u in (annotations.get(ANNOTATION_HAMI_UUID) or "").split(",") if u)
    containers = spec.get("containers") or [{}]
    return Pod(
        uid=meta.get("uid", ""),
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        container=containers[0].get("name", ""),
        node=spec["nodeName"],
        created=meta.get("creationTimestamp", ""),
        started=started_ts,
        profile=profile if profile in PROFILES else DEFAULT_PROFILE,
        period=_duration_seconds(annotations.get(ANNOTATION_PERIOD)),
        resources=resources,
        pinned_uuids=pinned,
    )


# --- assignment: which pod holds which device --------------------------------------------


@dataclass
class Assignments:
    """Sticky: a pod keeps its devices until it is gone."""

    held: dict[str, list[Holding]] = field(default_factory=dict)

    def update(self, nodes: Mapping[str, Node], pods: Iterable[Pod]) -> dict[str, list[Holding]]:
        pods = sorted(pods, key=lambda p: (p.created, p.uid))
        alive = {p.uid for p in pods}
        for uid in list(self.held):
            if uid not in alive:
                del self.held[uid]
        for pod in pods:
            node = nodes.get(pod.node)
            if pod.uid in self.held or node is None:
                continue
            self.held[pod.uid] = self._assign(node, pod)
        return self.held

    def _used(self, device: Device) -> float:
        return sum(h.share for hs in self.held.values() for h in hs if h.device.key == device.key)

    def _holders(self, device: Device) -> int:
        return sum(1 for hs in self.held.values() for h in hs if h.device.key == device.key)

    def _assign(self, node: Node, pod: Pod) -> list[Holding]:
        res = pod.resources
        if node.mode == "mig":
            holdings: list[Holding] = []
            for key, count in sorted(res.items()):
                if not key.startswith("nvidia.com/mig-"):
                    continue
                profile = key.removeprefix("nvidia.com/mig-")
                free = [d for d in node.devices if d.profile == profile and not self._holders(d)]
                holdings += [Holding(d, 1.0) for d in free[:count]]
            return holdings
        if node.mode == "time-slicing":
            shares: dict[tuple[str, int, str], float] = {}
            for _ in range(res.get("nvidia.com/gpu.shared", 0)):
                for device in node.devices:
                    mine = round(shares.get(device.key, 0.0) * device.slots)
                    if self._slices(device) + mine < device.slots:
                        shares[device.key] = shares.get(device.key, 0.0) + 1 / device.slots
                        break
            return [Holding(d, shares[d.key]) for d in node.devices if d.key in shares]
        if node.mode == "hami":
            count = res.get("nvidia.com/gpu", 0)
            cores = res.get("nvidia.com/gpucores")
            share = min(1.0, cores / 100) if cores else 1 / max(1, node.devices[0].slots)
            if pod.pinned_uuids:
                chosen = [d for d in node.devices if d.uuid in pod.pinned_uuids]
            else:
                chosen = [d for d in node.devices if self._holders(d) < d.slots][:count]
            return [Holding(d, share) for d in chosen[: max(count, len(pod.pinned_uuids))]]
        count = res.get("nvidia.com/gpu", 0)
        if pod.pinned_uuids:
            chosen = [d for d in node.devices if d.uuid in pod.pinned_uuids]
        else:
            chosen = [d for d in node.devices if not self._holders(d)][:count]
        return [Holding(d, 1.0) for d in chosen]

    def _slices(self, device: Device) -> int:
        return round(self._used(device) * device.slots)


# --- utilisation profiles ----------------------------------------------------------------


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


# --- the exporter process ----------------------------------------------------------------


class Simulator:
    """Reads the cluster (nodes cached for ``node_ttl`` seconds) and renders a scrape."""

    def __init__(
        self,
        kubeconfig: str,
        *,
        node_ttl: float = 30.0,
        exporter: ExporterProfile | None = None,
    ) -> None:
        from kubernetes import client, config

        self._exporter = exporter or EXPORTERS[DEFAULT_EXPORTER]
        self._exporter_pods: dict[str, str] = {}
        self._api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        self._node_ttl = node_ttl
        self._nodes: dict[str, Node] = {}
        self._nodes_at = 0.0
        self._assignments = Assignments()
        self._lock = threading.Lock()

    def _list(self, call: Any, **kwargs: Any) -> list[dict[str, Any]]:
        response = call(_preload_content=False, _request_timeout=10, **kwargs)
        return list(json.loads(response.data).get("items") or [])

    def scrape(self, now: float | None = None) -> str:
        with self._lock:
            moment = time.time() if now is None else now
            if not self._nodes or moment - self._nodes_at > self._node_ttl:
                raw = self._list(self._api.list_node, label_selector="nvidia.com/gpu.present=true")
                self._nodes = {n.name: n for n in map(node_from_k8s, raw) if n is not None}
                self._nodes_at = moment
            if self._exporter.host_is_exporter_pod:
                key, value = EXPORTER_POD_LABEL
                exporters = self._list(
                    self._api.list_pod_for_all_namespaces, label_selector=f"{key}={value}"
                )
                self._exporter_pods = {
                    str(p["spec"]["nodeName"]): str(p["metadata"]["name"])
                    for p in exporters
                    if (p.get("spec") or {}).get("nodeName")
                }
            raw_pods = self._list(
                self._api.list_pod_for_all_namespaces, field_selector="status.phase=Running"
            )
            pods = [p for p in map(pod_from_k8s, raw_pods) if p is not None]
            held = self._assignments.update(self._nodes, pods)
            nodes = [self._nodes[name] for name in sorted(self._nodes)]
            return render(
                nodes,
                pods,
                held,
                moment,
                exporter=self._exporter,
                exporter_pods=self._exporter_pods,
            )


def serve(simulator: Simulator, host: str, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/healthz":
                body, status = b"ok\n", 200
            elif self.path.split("?")[0] == "/metrics":
                try:
                    body, status = simulator.scrape().encode(), 200
                except Exception as exc:  # report, keep serving
                    body, status = f"scrape failed: {exc}\n".encode(), 503
            else:
                body, status = b"not found\n", 404
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.dcgm_sim")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9400)
    parser.add_argument(
        "--exporter",
        choices=sorted(EXPORTERS),
        default=DEFAULT_EXPORTER,
        help="the exporter variant to imitate (labels and metric families)",
    )
    parser.add_argument(
        "--unmeasured",
        action="append",
        default=None,
        metavar="NODE_PATTERN",
        help="nodes whose GPUs export no utilisation (dcgm-exporter variants; default h100-3)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=600.0,
        help="seconds to wait for the kubeconfig file (kubesim writes it once it is up)",
    )
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.wait
    while not Path(args.kubeconfig).exists():
        if time.monotonic() > deadline:
            print(f"dcgm-sim: {args.kubeconfig} did not appear", file=sys.stderr)
            return 1
        time.sleep(1)
    exporter = EXPORTERS[args.exporter]
    if args.unmeasured is not None and exporter.name != "agent":
        exporter = replace(exporter, unmeasured=tuple(args.unmeasured))
    server = serve(Simulator(args.kubeconfig, exporter=exporter), args.host, args.port)
    print(f"dcgm-sim listening on http://{args.host}:{server.server_port}/metrics", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
