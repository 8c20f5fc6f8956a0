"""The ResourceSlices published for kubesim's fake GPU nodes, as NVIDIA's DRA driver shapes them."""

from __future__ import annotations

import json
from typing import Any

from deploy.devtools import dra


def _node(mode: str, **labels: str) -> dict[str, Any]:
    annotations = {"kubesim.io/node": "fake", "kubesim.io/gpu-uuids": json.dumps(["GPU-0"])}
    if mode == "mig":
        annotations["kubesim.io/mig-devices"] = json.dumps(
            [
                {"gpu": 0, "profile": "1g.10gb", "uuid": "MIG-a"},
                {"gpu": 0, "profile": "3g.40gb", "uuid": "MIG-b"},
            ]
        )
    return {
        "metadata": {
            "name": "n0",
            "uid": "u",
            "labels": {
                "kubesim.io/sharing-mode": mode,
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.memory": "81920",
                **labels,
            },
            "annotations": annotations,
        }
    }


def test_a_whole_gpu_is_a_device_with_the_driver_attributes_and_memory() -> None:
    (only,) = dra.node_slices(_node("whole", **{"nvidia.com/gpu.family": "ampere"}))
    assert only["spec"]["driver"] == "gpu.nvidia.com"
    assert only["spec"]["nodeName"] == "n0"
    (device,) = only["spec"]["devices"]
    assert device["name"] == "gpu-0"
    assert device["attributes"]["productName"] == {"string": "NVIDIA A100 SXM4 80GB"}
    assert device["attributes"]["architecture"] == {"string": "Ampere"}
    assert device["attributes"]["uuid"] == {"string": "GPU-0"}
    assert device["capacity"] == {"memory": {"value": "81920Mi"}}


def test_mig_devices_consume_their_gpus_counters_from_a_counter_only_slice() -> None:
    counters, devices = dra.node_slices(_node("mig"))
    assert "devices" not in counters["spec"]
    assert counters["spec"]["sharedCounters"][0]["name"] == "gpu-0-counter-set"
    small, big = devices["spec"]["devices"]
    assert small["attributes"]["profile"] == {"string": "1g.10gb"}
    assert small["attributes"]["parentUUID"] == {"string": "GPU-0"}
    assert small["consumesCounters"][0]["counters"] == {
        "memory": {"value": "10240Mi"},
        "memory-slice-0": {"value": "1"},
    }
    assert sorted(big["consumesCounters"][0]["counters"]) == [
        "memory",
        "memory-slice-1",
        "memory-slice-2",
        "memory-slice-3",
        "memory-slice-4",
    ]
    assert counters["spec"]["pool"]["resourceSliceCount"] == 2


def test_a_time_sliced_gpu_allows_several_allocations_of_its_memory_by_slice() -> None:
    (only,) = dra.node_slices(_node("time-slicing", **{"nvidia.com/gpu.replicas": "4"}))
    (device,) = only["spec"]["devices"]
    assert device["allowMultipleAllocations"] is True
    policy = device["capacity"]["memory"]["requestPolicy"]
    assert policy["validRange"]["step"] == "20480Mi"


def test_real_and_hami_nodes_publish_nothing() -> None:
    real = _node("whole")
    real["metadata"]["annotations"]["kubesim.io/node"] = "real"
    assert dra.node_slices(real) == []
    assert dra.node_slices(_node("hami")) == []
