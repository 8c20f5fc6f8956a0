"""The DCGM simulator's rules on plain data: which pod holds which device, the profiles, and
that its output reads back as dcgm-exporter's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.telemetry import core
from deploy.devtools import dcgm_sim as sim

UUIDS = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(4)]


def node(mode: str = "whole", **labels: str) -> sim.Node:
    annotations = {sim.ANNOTATION_GPU_UUIDS: json.dumps(UUIDS)}
    if mode == "mig":
        layout = [
            {"gpu": g, "profile": p, "uuid": f"MIG-{g}-{i}"}
            for g in range(4)
            for i, p in enumerate(["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"])
        ]
        annotations[sim.ANNOTATION_MIG_DEVICES] = json.dumps(layout)
    obj = {
        "metadata": {
            "name": f"{mode}-0",
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.memory": "81559",
                "kubesim.io/sharing-mode": mode,
                **labels,
            },
            "annotations": annotations,
        }
    }
    parsed = sim.node_from_k8s(obj)
    assert parsed is not None
    return parsed


def pod(
    name: str, resources: dict[str, int], created: str, profile: str = "busy", **extra: Any
) -> sim.Pod:
    return sim.Pod(
        uid=f"uid-{name}",
        namespace="team-a",
        name=name,
        container="main",
        node=extra.pop("node", "whole-0"),
        created=created,
        started=0.0,
        profile=profile,
        period=None,
        resources=resources,
        **extra,
    )


def test_whole_gpus_go_to_pods_in_creation_order_and_stay_put() -> None:
    n = node()
    assignments = sim.Assignments()
    first = pod("a", {"nvidia.com/gpu": 2}, "2025-01-01T00:00:01Z")
    second = pod("b", {"nvidia.com/gpu": 1}, "2025-01-01T00:00:02Z")
    held = assignments.update({n.name: n}, [second, first])
    assert [h.device.index for h in held["uid-a"]] == [0, 1]
    assert [h.device.index for h in held["uid-b"]] == [2]
    # a ends; b keeps GPU 2, a newcomer takes the freed GPU 0.
    third = pod("c", {"nvidia.com/gpu": 1}, "2025-01-01T00:00:03Z")
    held = assignments.update({n.name: n}, [second, third])
    assert [h.device.index for h in held["uid-b"]] == [2]
    assert [h.device.index for h in held["uid-c"]] == [0]


def test_mig_pods_get_the_first_free_instance_of_their_profile() -> None:
    n = node("mig")
    held = sim.Assignments().update(
        {n.name: n},
        [
            pod("a", {"nvidia.com/mig-1g.10gb": 1}, "1", node=n.name),
            pod("b", {"nvidia.com/mig-1g.10gb": 1}, "2", node=n.name),
            pod("c", {"nvidia.com/mig-3g.40gb": 1}, "3", node=n.name),
        ],
    )
    assert [(h.device.index, h.device.instance) for h in held["uid-a"]] == [(0, "1")]
    assert [(h.device.index, h.device.instance) for h in held["uid-b"]] == [(0, "2")]
    assert held["uid-c"][0].device.profile == "3g.40gb"


def test_time_slices_pack_onto_the_lowest_gpu() -> None:
    n = node("time-slicing", **{"nvidia.com/gpu.replicas": "4"})
    held = sim.Assignments().update(
        {n.name: n},
        [
            pod("a", {"nvidia.com/gpu.shared": 3}, "1", node=n.name),
            pod("b", {"nvidia.com/gpu.shared": 2}, "2", node=n.name),
        ],
    )
    assert [(h.device.index, h.share) for h in held["uid-a"]] == [(0, 0.75)]
    assert [(h.device.index, h.share) for h in held["uid-b"]] == [(0, 0.25), (1, 0.25)]


def test_hami_pod_pinned_by_uuid_annotation_gets_that_gpu() -> None:
    n = node("hami", **{"nvidia.com/gpu.replicas": "10"})
    pinned = pod(
        "a",
        {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30},
        "1",
        node=n.name,
        pinned_uuids=(UUIDS[2],),
    )
    held = sim.Assignments().update({n.name: n}, [pinned])
    assert [(h.device.uuid, h.share) for h in held["uid-a"]] == [(UUIDS[2], 0.3)]


@pytest.mark.parametrize(
    ("profile", "low", "high"), [("busy", 90, 100), ("idle", 0, 2), ("bursty", 1, 95)]
)
def test_profiles_stay_in_their_range(profile: str, low: float, high: float) -> None:
    p = pod("a", {}, "1", profile=profile)
    values = [sim.utilisation_percent(p, 1_700_000_000 + t) for t in range(0, 600, 7)]
    assert all(low <= v <= high for v in values)


def test_bursty_alternates_and_ramping_rises() -> None:
    bursty = sim.Pod("u", "n", "p", "c", "x", "", 0.0, "bursty", 60.0, {})
    values = {sim.utilisation_percent(bursty, t) for t in range(0, 120, 5)}
    assert values == {95.0, 1.0}
    ramp = sim.Pod("u", "n", "p", "c", "x", "", 1000.0, "ramping", 600.0, {})
    assert sim.utilisation_percent(ramp, 1000) == 0
    assert sim.utilisation_percent(ramp, 1300) == 50
    assert sim.utilisation_percent(ramp, 5000) == 100


def test_output_reads_back_with_shared_gpus_per_pod_and_mig_by_engine_activity() -> None:
    whole, ts, mig = (
        node(),
        node("time-slicing", **{"nvidia.com/gpu.replicas": "4"}),
        node("mig"),
    )
    pods = [
        pod("busy-ts", {"nvidia.com/gpu.shared": 1}, "1", node=ts.name),
        pod("idle-ts", {"nvidia.com/gpu.shared": 1}, "2", profile="idle", node=ts.name),
        pod("mig", {"nvidia.com/mig-2g.20gb": 1}, "3", node=mig.name),
    ]
    nodes = {n.name: n for n in (whole, ts, mig)}
    held = sim.Assignments().update(nodes, pods)
    text = sim.render(list(nodes.values()), pods, held, 1_700_000_000)
    samples = core.parse_exposition(text)
    names = {s.name for s in samples}
    assert set(core.CORE_METRICS) <= names
    readings = core.readings_from_samples(samples)
    by_pod = {r.series.pod: r for r in readings if r.series.pod}
    assert by_pod["busy-ts"].series.per_pod and by_pod["idle-ts"].series.per_pod
    assert by_pod["busy-ts"].series.uuid == by_pod["idle-ts"].series.uuid
    assert 22.5 <= (by_pod["busy-ts"].get(core.GPU_UTIL) or 0) <= 25
    mig_reading = by_pod["mig"]
    assert mig_reading.get(core.GPU_UTIL) == 0
    assert mig_reading.series.profile == "2g.20gb"
    assert (mig_reading.utilisation or 0) >= 0.9
    free = [r for r in readings if r.series.hostname == "whole-0"]
    assert len(free) == 4 and all(r.series.pod == "" for r in free)
