"""The cluster as plain data (GPU nodes and their devices, Running pods and what they ask
for), read from the API server's objects, and which pod holds which device."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from deploy.devtools.dcgm_sim.exporters import (
    ANNOTATION_GPU_UUIDS,
    ANNOTATION_HAMI_UUID,
    ANNOTATION_MIG_DEVICES,
    ANNOTATION_PERIOD,
    ANNOTATION_PROFILE,
    DEFAULT_DRIVER,
    DEFAULT_PROFILE,
    MIG_INSTANCE_BASE,
    PROFILES,
)


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
