"""The heat map as plain data (:func:`apps.telemetry.selectors.heat.heat_nodes`): GPUs grouped
per physical GPU with their MIG instances inside, an A30 instance a partition of its GPU, who
holds every GPU measured or not, and exporter coverage per node."""

from __future__ import annotations

from apps.telemetry import core
from apps.telemetry.selectors.heat import Holder, heat_nodes, mig_slices_of


def reading(
    uuid: str,
    gpu: str,
    *,
    host: str = "node-0",
    model: str = "NVIDIA H100 80GB HBM3",
    instance: str = "",
    profile: str = "",
    pod: str = "",
    util: float | None = None,
    active: float | None = None,
) -> core.GpuReading:
    series = core.GpuSeries(
        hostname=host,
        uuid=uuid,
        gpu=gpu,
        instance=instance,
        profile=profile,
        model=model,
        namespace="team-vision" if pod else "",
        pod=pod,
    )
    values = {core.FB_USED: 1024.0}
    if util is not None:
        values[core.GPU_UTIL] = util
    if active is not None:
        values[core.GR_ENGINE_ACTIVE] = active
    return core.GpuReading(series, values)


def test_mig_instances_are_grouped_under_their_physical_gpu() -> None:
    mig = [
        reading("GPU-a", "0", instance=i, profile=p, active=0.5)
        for i, p in (("7", "1g.10gb"), ("1", "3g.40gb"), ("3", "2g.20gb"))
    ]
    (node,) = heat_nodes([*mig, reading("GPU-b", "1", util=40)], pod_owner={}, holders={})
    assert [g.label for g in node.gpus] == ["GPU 0", "GPU 1"]
    first, second = node.gpus
    assert first.is_mig and first.sharing == "MIG"
    assert [(c.instance, c.slices) for c in first.parts] == [("1", 3), ("3", 2), ("7", 1)]
    assert first.total_slices == 7 and first.unused_slices == 1
    assert not second.is_mig and [c.slices for c in second.parts] == [1]
    assert len(node.cells) == 4  # every cell, GPU by GPU


def test_an_a30_mig_instance_is_a_partition_of_its_gpu_not_a_whole_gpu() -> None:
    assert mig_slices_of("NVIDIA A30") == 4 and mig_slices_of("NVIDIA A100-SXM4-80GB") == 7
    one = reading("GPU-a30", "0", model="NVIDIA A30", instance="3", profile="1g.6gb", active=0.2)
    (node,) = heat_nodes([one], pod_owner={}, holders={})
    (gpu,) = node.gpus
    (cell,) = gpu.parts
    assert gpu.is_mig and cell.slices == 1 and gpu.total_slices == 4 and gpu.unused_slices == 3
    assert cell.label == "GPU 0 · 1g.6gb · instance 3"


def test_every_gpu_shows_who_holds_it_measured_or_not() -> None:
    readings = [
        reading("GPU-a", "0", pod="dark-0"),  # its exporter sends memory only
        reading("GPU-b", "1", pod="other-0", util=90),
        reading("GPU-c", "2", pod="slice-0", util=30),
        reading("GPU-c", "2", pod="slice-1", util=30),
    ]
    owners = {
        ("team-vision", "dark-0"): 1,
        ("team-vision", "other-0"): 2,
        ("team-vision", "slice-0"): 1,
        ("team-vision", "slice-1"): 3,
    }
    holders = {
        1: Holder("Vision", "dark-run", 1),
        2: Holder("NLP"),  # a workload the viewer may not open: its team only
        3: Holder("Vision", "tuner", 3),
    }
    (node,) = heat_nodes(readings, pod_owner=owners, holders=holders)
    dark, other, sliced = node.gpus
    (cell,) = dark.parts
    assert cell.utilisation is None and cell.short == "n/d"
    assert cell.who == "dark-run · Vision" and cell.workloads == [(1, "dark-run")]
    assert other.parts[0].who == "a workload of NLP" and other.parts[0].workloads == []
    assert sliced.sharing == "2 time slices held"
    assert [h.label for h in sliced.holders] == ["dark-run · Vision", "tuner · Vision"]


def test_exporter_coverage_is_stated_per_node_as_measured() -> None:
    both = [reading("GPU-a", "0", util=0), reading("GPU-b", "1", util=55)]
    dark = [reading("GPU-c", "0", host="node-1"), reading("GPU-d", "1", host="node-1")]
    inventory = [
        ("node-0", ["GPU-a", "GPU-b"]),
        ("node-1", ["GPU-c", "GPU-d"]),
        ("node-2", ["GPU-e", "GPU-f"]),
        # The exporter names node-3 otherwise (its own pod): the inventory's UUIDs place it.
        ("node-3", ["GPU-g"]),
    ]
    elsewhere = [reading("GPU-g", "0", host="dcgm-exporter-x7k2", util=10)]
    nodes = {
        n.hostname: n
        for n in heat_nodes(
            [*both, *dark, *elsewhere], pod_owner={}, holders={}, inventory=inventory
        )
    }
    assert set(nodes) == {"node-0", "node-1", "node-2", "node-3"}
    assert nodes["node-0"].coverage == "2 of 2 GPUs measured"
    assert nodes["node-1"].coverage == "0 of 2 GPUs measured (2 report memory only)"
    assert nodes["node-2"].coverage == "exporter reports none of its 2 GPUs"
    assert nodes["node-3"].coverage == "1 of 1 GPU measured"
    partial = heat_nodes(both[:1], pod_owner={}, holders={}, inventory=inventory[:1])
    assert partial[0].coverage == "1 of 2 GPUs measured; 1 not reported"
