"""The pynvml node agent's mapping, behind the NVML boundary (a fake NVML; no GPU here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from apps.telemetry import core
from apps.telemetry.agent.__main__ import make_server
from apps.telemetry.agent.collector import Collector
from apps.telemetry.agent.fake import FakeGpu, FakeNvml
from apps.telemetry.agent.nvml import NvmlUnavailable, Process, PynvmlBackend
from apps.telemetry.agent.pods import CgroupPodResolver, PodRef, pod_uid_from_cgroup, pods_by_uid

POD_A = PodRef("team-vision", "wl-1-0", "notebook")
POD_B = PodRef("team-nlp", "wl-2-abcde", "main")


class Pods:
    def __init__(self, pods: dict[int, PodRef]) -> None:
        self.pods = pods

    def pod_of(self, pid: int) -> PodRef | None:
        return self.pods.get(pid)


def readings(collector: Collector) -> list[core.GpuReading]:
    return core.readings_from_samples(core.parse_exposition(collector.exposition()))


def test_idle_gpu_without_processes_has_no_pod_and_dcgm_labels() -> None:
    nvml = FakeNvml([FakeGpu(used_mib=0, utilisation=0)])
    (reading,) = readings(Collector(nvml, "node-1"))
    assert reading.series.hostname == "node-1"
    assert reading.series.model == "NVIDIA H100 80GB HBM3"
    assert reading.series.driver == "570.133.20"
    assert reading.series.pod == ""
    assert reading.get(core.FB_FREE) == 81559
    assert reading.utilisation == 0.0


def test_whole_gpu_of_one_pod_carries_its_labels_and_device_values() -> None:
    gpu = FakeGpu(used_mib=30000, utilisation=87, processes=[Process(11, 30000)])
    (reading,) = readings(Collector(FakeNvml([gpu]), "node-1", Pods({11: POD_A})))
    assert reading.series.pod_key == ("team-vision", "wl-1-0")
    assert reading.series.container == "notebook"
    assert reading.utilisation == pytest.approx(0.87)
    assert reading.get(core.FB_USED) == 30000
    assert reading.get(core.GR_ENGINE_ACTIVE) == pytest.approx(0.87)


def test_shared_gpu_reports_each_pods_own_sm_time_and_memory() -> None:
    gpu = FakeGpu(
        used_mib=12000,
        utilisation=60,
        processes=[Process(11, 10000), Process(12, 1000), Process(21, 1000)],
        sm_percent={11: 40, 12: 15, 21: 1},
    )
    rows = readings(Collector(FakeNvml([gpu]), "n", Pods({11: POD_A, 12: POD_A, 21: POD_B})))
    by_pod = {r.series.pod_key: r for r in rows}
    assert set(by_pod) == {("team-vision", "wl-1-0"), ("team-nlp", "wl-2-abcde")}
    assert all(r.series.per_pod for r in rows)
    assert by_pod[("team-vision", "wl-1-0")].get(core.GPU_UTIL) == 55
    assert by_pod[("team-vision", "wl-1-0")].get(core.FB_USED) == 11000
    assert by_pod[("team-nlp", "wl-2-abcde")].get(core.GPU_UTIL) == 1
    # Joined with allocations of a quarter GPU each: nobody is credited with the other's use.
    measures = core.measure_workloads(
        rows,
        {
            ("team-vision", "wl-1-0"): core.PodAllocation(1, 0.5),
            ("team-nlp", "wl-2-abcde"): core.PodAllocation(2, 0.5),
        },
    )
    assert measures[1].utilisation == pytest.approx(1.0)
    assert measures[2].utilisation == pytest.approx(0.02)


def test_shared_gpu_without_process_samples_splits_by_memory() -> None:
    gpu = FakeGpu(utilisation=50, processes=[Process(11, 3000), Process(21, 1000)], sm_percent={})
    rows = readings(Collector(FakeNvml([gpu]), "n", Pods({11: POD_A, 21: POD_B})))
    values = {r.series.pod: r.get(core.GPU_UTIL) for r in rows}
    assert values == {"wl-1-0": 37.5, "wl-2-abcde": 12.5}


def test_health_report_counts_gpus_and_fails_on_uncorrectable_ecc_and_xid() -> None:
    nvml = FakeNvml(
        [
            FakeGpu(uuid="GPU-a", ecc=(3, 0), temperature=40),
            FakeGpu(uuid="GPU-b", pci_bus_id="00000000:19:00.0", ecc=(0, 1), temperature=45),
        ],
        pending_xids=[(0, 79)],
    )
    collector = Collector(nvml, "node-9")
    node = collector.health()
    assert len(node.gpus) == 2
    assert node.driver_version == "570.133.20"
    assert {g.memory_mib for g in node.gpus} == {81559}
    assert node.verdict == "failed"
    assert any("XID 79" in p for p in node.problems)
    assert any("uncorrectable ECC" in p for p in node.problems)
    assert any("corrected ECC" in p for p in node.problems)
    # The XID stays reported after the event was consumed.
    assert "XID 79" in " ".join(collector.health().problems)


def test_healthy_node_passes_acceptance() -> None:
    node = Collector(FakeNvml([FakeGpu(), FakeGpu(uuid="GPU-b")]), "node-2").health()
    assert node.verdict == "ok", node.problems


def test_agent_serves_metrics_and_health_json() -> None:
    server = make_server(Collector(FakeNvml([FakeGpu(utilisation=42)]), "node-3"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        metrics = urllib.request.urlopen(f"{base}/metrics").read().decode()  # noqa: S310
        assert 'DCGM_FI_DEV_GPU_UTIL{gpu="0"' in metrics and "} 42" in metrics
        report = json.loads(urllib.request.urlopen(f"{base}/health.json").read())  # noqa: S310
        assert report["gpu_count"] == 1 and report["verdict"] == "ok"
    finally:
        server.shutdown()
        server.server_close()


def test_pod_uid_is_read_from_cgroupfs_and_systemd_paths() -> None:
    uid = "3f2a1b4c-1111-2222-3333-444455556666"
    assert pod_uid_from_cgroup(f"0::/kubepods/burstable/pod{uid}/abc\n") == uid
    systemd = f"0::/kubepods.slice/kubepods-pod{uid.replace('-', '_')}.slice/cri-containerd-x\n"
    assert pod_uid_from_cgroup(systemd) == uid
    assert pod_uid_from_cgroup("0::/user.slice/session-1.scope\n") is None


def test_cgroup_resolver_names_the_pod_of_a_process(tmp_path: Path) -> None:
    uid = "3f2a1b4c-1111-2222-3333-444455556666"
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "cgroup").write_text(f"0::/kubepods/pod{uid}/c1\n")
    resolver = CgroupPodResolver(lambda: {uid: POD_A}, proc=tmp_path)
    assert resolver.pod_of(77) == POD_A
    assert resolver.pod_of(78) is None


def test_pods_of_the_node_are_named_by_uid_with_their_first_container() -> None:
    pods = [
        {
            "metadata": {"uid": "u-1", "namespace": "team-vision", "name": "wl-1-0"},
            "spec": {"containers": [{"name": "notebook"}, {"name": "sidecar"}]},
        },
        {"metadata": {"uid": "u-2", "namespace": "kube-system", "name": "bare"}, "spec": {}},
    ]
    assert pods_by_uid(pods) == {"u-1": POD_A, "u-2": PodRef("kube-system", "bare", "")}


def test_the_agent_reads_pods_without_django() -> None:
    """The node agent runs without Django: the read module it uses must import without it."""
    code = "import apps.orchestration.cluster_reads, apps.telemetry.agent.pods"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_real_backend_says_so_when_there_is_no_driver() -> None:
    try:
        backend = PynvmlBackend()
    except NvmlUnavailable as exc:
        assert "NVML" in str(exc)
    else:  # a machine with a GPU: the real backend answers the boundary's calls
        try:
            assert backend.device_count() >= 1
            assert backend.uuid(0).startswith(("GPU-", "MIG-"))
        finally:
            backend.shutdown()
