"""NVIDIA's DRA driver for kubesim's simulated GPU nodes: the DeviceClasses it installs and the
ResourceSlices its kubelet plugin publishes, made from what each fake node says about its GPUs
(GPU feature discovery's labels, kubesim's UUID and MIG annotations).

Shapes (Kubernetes ``resource.k8s.io/v1`` as served by 1.36; NVIDIA DRA Driver for GPUs):

* DeviceClasses ``gpu.nvidia.com`` (devices of type ``gpu``) and ``mig.nvidia.com`` (type
  ``mig``), each a CEL selector on ``device.driver`` and the ``type`` attribute.
* One pool per node (pool name = node name, ``nodeName`` set, owned by the Node so it goes
  with it). A GPU is device ``gpu-<i>`` with the attributes ``type``, ``uuid``, ``index``,
  ``minor``, ``productName`` (NVML's name: the product label with spaces), ``brand``,
  ``architecture``, ``cudaComputeCapability``, ``driverVersion``, ``cudaDriverVersion`` and
  the capacity ``memory``.
* MIG (a partitionable GPU): per GPU a slice holding only its counter set
  ``gpu-<i>-counter-set`` (``memory`` and one ``memory-slice-<k>`` per eighth of the memory;
  a slice has either devices or shared counters, never both), and one slice of MIG devices
  ``gpu-<i>-mig-<slot>`` (attributes ``type=mig``, ``profile``, ``uuid``, ``parentUUID``,
  ``parentIndex``, ``index``, …; capacity ``memory``) each consuming its memory and its run of
  memory slices from its GPU's counter set, laid out as the node's MIG layout.
* Time-slicing (a shareable GPU): ``allowMultipleAllocations: true`` and a consumable
  ``memory`` capacity whose request policy steps by memory ÷ replicas: a claim for k slices
  asks for k steps, and the scheduler never hands out more than the GPU has.

Real nodes get no slices: a pod with a claim there would need the driver's kubelet plugin.

Command line, for a cluster started with ``python -m deploy.devtools.kubesim up``::

    python -m deploy.devtools.dra --kubeconfig var/kubesim/admin.kubeconfig
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.k8s.io/v1"
PUBLISHER_LABEL = "kubesim.io/dra-publisher"
PUBLISHER = "gpupaas-devtools"
MEMORY_SLICES = 8  # a MIG-capable GPU's memory is cut in eighths
MIG_PROFILE = re.compile(r"^(?P<slices>[1-7])g\.(?P<gb>\d{1,3})gb$")
ARCHITECTURES = {
    "hopper": "Hopper",
    "ampere": "Ampere",
    "ada-lovelace": "Ada Lovelace",
    "blackwell": "Blackwell",
    "turing": "Turing",
    "volta": "Volta",
}


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses NVIDIA's driver installs for GPUs and MIG devices."""

    def device_class(name: str, device_type: str) -> dict[str, Any]:
        expression = (
            f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "{device_type}"'
        )
        return {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {PUBLISHER_LABEL: PUBLISHER}},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }

    return [device_class("gpu.nvidia.com", "gpu"), device_class("mig.nvidia.com", "mig")]


def _version(text: str) -> str:
    """A semantic version from a dotted number (9.0 → 9.0.0)."""
    parts = [p for p in text.split(".") if p.isdigit()][:3]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(str(int(p)) for p in parts)


def _gpu_attributes(labels: Mapping[str, str], index: int, uuid: str) -> dict[str, Any]:
    product = labels.get("nvidia.com/gpu.product", "")
    attributes: dict[str, Any] = {
        "type": {"string": "gpu"},
        "uuid": {"string": uuid},
        "index": {"int": index},
        "minor": {"int": index},
        "productName": {"string": product.replace("-", " ")},
        "brand": {"string": "Nvidia"},
    }
    family = labels.get("nvidia.com/gpu.family")
    if family:
        attributes["architecture"] = {"string": ARCHITECTURES.get(family, family.title())}
    major, minor = (
        labels.get("nvidia.com/gpu.compute.major"),
        labels.get("nvidia.com/gpu.compute.minor"),
    )
    if major and minor:
        attributes["cudaComputeCapability"] = {"version": _version(f"{major}.{minor}")}
    driver = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    if all(driver):
        attributes["driverVersion"] = {"version": _version(".".join(str(d) for d in driver))}
    runtime = [labels.get(f"nvidia.com/cuda.runtime.{p}") for p in ("major", "minor")]
    if all(runtime):
        attributes["cudaDriverVersion"] = {"version": _version(".".join(str(r) for r in runtime))}
    return attributes


def _slice(node: Mapping[str, Any], suffix: str, count: int, spec: dict[str, Any]) -> dict:
    meta = node["metadata"]
    name = meta["name"]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{name}-{DRIVER}-{suffix}",
            "labels": {PUBLISHER_LABEL: PUBLISHER},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": meta["uid"]}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


def _memory_slices(profile: str, gpu_mib: int) -> int:
    match = MIG_PROFILE.match(profile)
    if not match:
        return MEMORY_SLICES
    per_slice = gpu_mib / MEMORY_SLICES
    return max(1, min(MEMORY_SLICES, math.ceil(int(match.group("gb")) * 1024 / per_slice)))


def node_slices(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ResourceSlices NVIDIA's kubelet plugin would publish for ``node`` (a Node as the
    API server's JSON); none for a node without GPUs, a HAMi node or a real node."""
    meta = node["metadata"]
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    if annotations.get("kubesim.io/node") != "fake":
        return []
    mode = labels.get("kubesim.io/sharing-mode", "none")
    uuids: list[str] = json.loads(annotations.get("kubesim.io/gpu-uuids") or "[]")
    if mode not in ("whole", "time-slicing", "mig") or not uuids:
        return []
    gpu_mib = int(labels.get("nvidia.com/gpu.memory") or 0)
    if mode == "mig":
        return _mig_slices(node, labels, annotations, uuids, gpu_mib)
    replicas = int(labels.get("nvidia.com/gpu.replicas") or 1)
    devices = []
    for index, uuid in enumerate(uuids):
        device: dict[str, Any] = {
            "name": f"gpu-{index}",
            "attributes": _gpu_attributes(labels, index, uuid),
            "capacity": {"memory": {"value": f"{gpu_mib}Mi"}},
        }
        if mode == "time-slicing" and replicas > 1:
            step = gpu_mib // replicas
            device["allowMultipleAllocations"] = True
            device["capacity"]["memory"]["requestPolicy"] = {
                "default": f"{step}Mi",
                "validRange": {
                    "min": f"{step}Mi",
                    "max": f"{step * replicas}Mi",
                    "step": f"{step}Mi",
                },
            }
        devices.append(device)
    return [_slice(node, "gpus", 1, {"devices": devices})]


def _mig_slices(
    node: Mapping[str, Any],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    uuids: Sequence[str],
    gpu_mib: int,
) -> list[dict[str, Any]]:
    instances: list[dict[str, Any]] = json.loads(annotations.get("kubesim.io/mig-devices") or "[]")
    count = len(uuids) + 1
    slices = []
    for index in range(len(uuids)):
        counters = {"memory": {"value": f"{gpu_mib}Mi"}} | {
            f"memory-slice-{k}": {"value": "1"} for k in range(MEMORY_SLICES)
        }
        slices.append(
            _slice(
                node,
                f"gpu-{index}-counters",
                count,
                {"sharedCounters": [{"name": f"gpu-{index}-counter-set", "counters": counters}]},
            )
        )
    devices = []
    next_slot: dict[int, int] = {}
    first_memory_slice: dict[int, int] = {}
    for instance in instances:
        parent = int(instance["gpu"])
        if not 0 <= parent < len(uuids):
            continue
        slot = next_slot.get(parent, 0)
        next_slot[parent] = slot + 1
        profile = str(instance["profile"])
        size = _memory_slices(profile, gpu_mib)
        start = first_memory_slice.get(parent, 0)
        first_memory_slice[parent] = start + size
        match = MIG_PROFILE.match(profile)
        memory = f"{int(match.group('gb')) * 1024}Mi" if match else f"{gpu_mib}Mi"
        attributes = _gpu_attributes(labels, parent, uuids[parent])
        attributes.update(
            {
                "type": {"string": "mig"},
                "uuid": {"string": str(instance["uuid"])},
                "parentUUID": {"string": uuids[parent]},
                "parentIndex": {"int": parent},
                "index": {"int": slot},
                "profile": {"string": profile},
            }
        )
        used = {"memory": {"value": memory}} | {
            f"memory-slice-{k}": {"value": "1"}
            for k in range(start, min(MEMORY_SLICES, start + size))
        }
        devices.append(
            {
                "name": f"gpu-{parent}-mig-{slot}",
                "attributes": attributes,
                "capacity": {"memory": {"value": memory}},
                "consumesCounters": [{"counterSet": f"gpu-{parent}-counter-set", "counters": used}],
            }
        )
    slices.append(_slice(node, "mig", count, {"devices": devices}))
    return slices


def publish(api_client: Any) -> int:
    """Install the DeviceClasses and publish every fake GPU node's ResourceSlices through
    ``api_client`` (a ``kubernetes.client.ApiClient``); already there is fine. Returns the
    number of devices published."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(api_client)
    group, version = API_VERSION.split("/")

    def create(plural: str, body: dict[str, Any]) -> None:
        try:
            custom.create_cluster_custom_object(group, version, plural, body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    for device_class in device_classes():
        create("deviceclasses", device_class)
    nodes = client.CoreV1Api(api_client).list_node()
    devices = 0
    for node in nodes.items:
        for resource_slice in node_slices(api_client.sanitize_for_serialization(node)):
            create("resourceslices", resource_slice)
            devices += len(resource_slice["spec"].get("devices") or ())
    return devices


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.dra", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="seconds to wait for the cluster (its kubeconfig and API server) to come up",
    )
    args = parser.parse_args(argv)
    from kubernetes import config

    deadline = time.monotonic() + args.wait
    while True:
        try:
            api_client = config.new_client_from_config(config_file=args.kubeconfig)
            try:
                print(f"dra: {publish(api_client)} devices published", flush=True)
            finally:
                api_client.close()
            return 0
        except Exception as exc:
            if time.monotonic() > deadline:
                print(f"dra: could not publish: {exc}", file=sys.stderr)
                return 1
            time.sleep(2)


if __name__ == "__main__":
    sys.exit(main())
