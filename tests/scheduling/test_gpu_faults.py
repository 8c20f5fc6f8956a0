"""One GPU that fails its health check stops taking work; the rest of its node goes on.

Before, a single GPU with uncorrectable ECC errors failed the whole node: its seven healthy
GPUs took no work either. Now the GPU's fault is its own (NoSchedule, or NoExecute when it fell
off the bus), and placement leaves out only that GPU, for whole, time-sliced and MIG pools.
"""

from __future__ import annotations

from dataclasses import replace

from apps.scheduling.data import ReplicaPlacement
from apps.scheduling.fragmentation import FragModel, default_typical
from apps.scheduling.placement import GpuPool, MigPool
from apps.scheduling.units import Demand, replica_demand
from apps.telemetry import core as telemetry
from tests.scheduling.builders import A100_MIG, H100, L40S, nodes


def _node(**gpu3: object) -> telemetry.NodeHealth:
    gpus = [telemetry.GpuHealth(index=str(i), uuid=f"GPU-{i}") for i in range(8)]
    for name, value in gpu3.items():
        setattr(gpus[3], name, value)
    return telemetry.NodeHealth("h100-0", "dcgm-exporter", gpus)


def test_a_gpu_with_uncorrectable_ecc_errors_is_its_own_fault_not_the_nodes() -> None:
    node = telemetry.health_verdict(_node(ecc_dbe=2), expected_gpus=8)
    assert node.verdict == "failed"  # the acceptance report still fails it
    assert node.node_failures == []
    (fault,) = node.gpu_faults
    assert (fault.uuid, fault.effect, fault.code) == ("GPU-3", telemetry.NO_SCHEDULE, "ecc-dbe")
    assert "2 uncorrectable ECC errors" in fault.reason
    assert node.scheduling_verdict == "degraded"


def test_a_gpu_that_fell_off_the_bus_moves_its_work_off() -> None:
    node = telemetry.health_verdict(_node(xid=79, ecc_dbe=1), expected_gpus=8)
    (fault,) = node.gpu_faults
    assert fault.effect == telemetry.NO_EXECUTE
    assert fault.reason == "GPU 3 (GPU-3) fell off the bus (XID 79)"


def test_other_critical_xids_and_heat_take_the_gpu_out_of_new_work_only() -> None:
    assert telemetry.gpu_fault(telemetry.GpuHealth("1", "u", xid=48)).effect == "NoSchedule"
    hot = telemetry.gpu_fault(telemetry.GpuHealth("1", "u", temperature_c=95))
    assert hot is not None and (hot.effect, hot.code) == ("NoSchedule", "temperature")
    # A warning is no fault: corrected ECC errors, a non-critical XID, a warm GPU.
    for gpu in (
        telemetry.GpuHealth("1", "u", ecc_sbe=5),
        telemetry.GpuHealth("1", "u", xid=13),
        telemetry.GpuHealth("1", "u", temperature_c=85),
    ):
        assert telemetry.gpu_fault(gpu) is None


def test_a_node_reporting_fewer_gpus_than_expected_still_fails_as_a_whole() -> None:
    """Which GPU is missing cannot be told, so the node takes no work."""
    node = _node()
    node.gpus.pop()
    judged = telemetry.health_verdict(node, expected_gpus=8)
    assert judged.scheduling_verdict == "failed"
    assert judged.node_failures == ["7 GPUs reported, the inventory expects 8."]


def test_whole_gpus_are_not_placed_on_a_faulty_gpu_but_on_the_rest_of_its_node() -> None:
    (node,) = nodes(H100, 1)
    pool = GpuPool(
        H100, "hub", (replace(node, down_gpus=(3,)),), FragModel(default_typical(), 1000)
    )
    assert pool.place(Demand(1000, 8)) is None
    placed = pool.place(Demand(1000, 7))
    assert placed is not None and 3 not in placed.gpus
    assert pool.gpu_free_units()["h100-0"] == [0] * 8


def test_work_that_ends_on_a_faulty_gpu_frees_nothing_there() -> None:
    (node,) = nodes(H100, 1)
    pool = GpuPool(
        H100, "hub", (replace(node, down_gpus=(3,)),), FragModel(default_typical(), 1000)
    )
    running = ReplicaPlacement("h100-0", (2, 3), 1000)
    pool.take(running, 0, 0)
    pool.release(running, 0, 0)  # as a preemption's what-if, or the work ending
    assert pool.gpu_free_units()["h100-0"] == [1000, 1000, 1000, 0, 1000, 1000, 1000, 1000]


def test_time_sliced_slots_of_a_faulty_gpu_are_not_offered() -> None:
    (node,) = nodes(L40S, 1, gpus=1)
    pool = GpuPool(L40S, "hub", (replace(node, down_gpus=(0,)),), FragModel(default_typical(), 4))
    assert pool.place(replica_demand(L40S, 250)) is None


def test_mig_instances_of_a_faulty_gpu_are_not_offered_and_stay_taken() -> None:
    (node,) = nodes(A100_MIG, 1, gpus=2)
    pool = MigPool(A100_MIG, "hub", (replace(node, down_gpus=(0,)),))
    demand = replica_demand(A100_MIG, 100)
    placed = [pool.place(demand) for _ in range(3)]
    assert [p.gpus for p in placed if p is not None] == [(1,), (1,)]
    assert placed[2] is None  # GPU 1 has two 1g.10gb instances; GPU 0 is down
    on_faulty = ReplicaPlacement("a100-0", (0,), 0, mig_profile="1g.10gb", mig_slot=0)
    pool.take(on_faulty, 0, 0)
    pool.release(on_faulty, 0, 0)
    assert pool.place(demand) is None
