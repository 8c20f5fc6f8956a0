"""What each exporter variant the simulator imitates looks like, and how the pure telemetry
rules read it: unowned devices, host labels, MIG instance ids, unmeasured GPUs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from apps.telemetry import core
from deploy.devtools import dcgm_sim as sim

UUIDS = [f"GPU-{i:08d}-0000-0000-0000-000000000000" for i in range(2)]
RULE_TESTS = sorted((Path(__file__).resolve().parents[2] / "deploy/prometheus/tests").glob("*.yml"))


def make_node(name: str, mode: str = "whole") -> sim.Node:
    annotations = {sim.ANNOTATION_GPU_UUIDS: json.dumps(UUIDS)}
    if mode == "mig":
        layout = [
            {"gpu": g, "profile": p}
            for g in range(2)
            for p in ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
        ]
        annotations[sim.ANNOTATION_MIG_DEVICES] = json.dumps(layout)
    parsed = sim.node_from_k8s(
        {
            "metadata": {
                "name": name,
                "labels": {
                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    "nvidia.com/gpu.memory": "81559",
                    "kubesim.io/sharing-mode": mode,
                    "nvidia.com/gpu.replicas": "4",
                },
                "annotations": annotations,
            }
        }
    )
    assert parsed is not None
    return parsed


def scrape(exporter: str, *nodes: sim.Node, pods: tuple[sim.Pod, ...] = ()) -> list[core.Sample]:
    held = sim.Assignments().update({n.name: n for n in nodes}, pods)
    text = sim.render(
        list(nodes),
        list(pods),
        held,
        1_700_000_000,
        exporter=sim.EXPORTERS[exporter],
        exporter_pods={"h100-0": "nvidia-dcgm-exporter-x1y2z"},
    )
    return core.parse_exposition(text)


def busy_pod(node: str, resources: dict[str, int]) -> sim.Pod:
    return sim.Pod(
        uid="uid-a",
        namespace="team-a",
        name="train-0",
        container="main",
        node=node,
        created="2025-01-01T00:00:00Z",
        started=0.0,
        profile="busy",
        period=None,
        resources=resources,
    )


@pytest.mark.parametrize("exporter", sorted(sim.EXPORTERS))
def test_only_the_agent_labels_per_pod_accounting_on_a_shared_gpu(exporter: str) -> None:
    shared = make_node("ts-0", "time-slicing")
    pods = tuple(
        sim.Pod(
            uid=f"uid-{i}",
            namespace="team-a",
            name=f"p-{i}",
            container="main",
            node="ts-0",
            created=f"2025-01-01T00:00:0{i}Z",
            started=0.0,
            profile="busy",
            period=None,
            resources={"nvidia.com/gpu.shared": 1},
        )
        for i in range(2)
    )
    samples = scrape(exporter, shared, pods=pods)
    held = [s for s in samples if s.labels.get("pod", "").startswith("p-")]
    assert {s.labels["pod"] for s in held} == {"p-0", "p-1"}
    labelled = {core.ACCOUNTING_LABEL in s.labels for s in held}
    assert labelled == {exporter == "agent"}


def test_host_labels_of_each_variant() -> None:
    hosts = {
        name: {(k, v) for s in scrape(name, make_node("h100-0")) for k, v in s.labels.items()}
        for name in sim.EXPORTERS
    }
    assert ("Hostname", "h100-0") in hosts["dcgm-3-h100"]
    assert ("hostname", "nvidia-dcgm-exporter-x1y2z") in hosts["dcgm-4-h100"]
    assert not {k for k, _ in hosts["dcgm-4-a30-mig"]} & {"Hostname", "hostname"}
    assert "pci_bus_id" not in {k for k, _ in hosts["dcgm-4-h100"]}


def test_unowned_devices_empty_or_omit_their_pod_labels() -> None:
    for name, expected in (("dcgm-3-h100", {"pod": ""}), ("dcgm-4-h100", {})):
        free = [s.labels for s in scrape(name, make_node("h100-0"))]
        assert all({k: v for k, v in lb.items() if k == "pod"} == expected for lb in free)


def test_unmeasured_gpus_export_neither_utilisation_metric_and_read_as_no_data() -> None:
    node = make_node("h100-3")
    samples = scrape("dcgm-4-h100", node, pods=(busy_pod("h100-3", {"nvidia.com/gpu": 1}),))
    names = {s.name for s in samples}
    assert core.GPU_UTIL not in names and core.GR_ENGINE_ACTIVE not in names
    assert core.FB_USED in names
    readings = core.readings_from_samples(samples)
    held = [r for r in readings if r.series.pod == "train-0"]
    assert held and all(r.utilisation is None for r in held)
    measures = core.measure_workloads(
        readings, {("team-a", "train-0"): core.PodAllocation(workload_id=1, gpus=1)}
    )
    assert 1 not in measures  # no data: not a measurement of 0


def test_rtx_has_no_profiling_families_and_a30_mig_no_util_on_instances() -> None:
    rtx = {s.name for s in scrape("dcgm-3-rtx", make_node("h100-0"))}
    assert not any(name.startswith("DCGM_FI_PROF_") for name in rtx)
    mig = scrape("dcgm-4-a30-mig", make_node("a100-mig-0", "mig"))
    assert core.GPU_UTIL not in {s.name for s in mig}
    assert core.GR_ENGINE_ACTIVE in {s.name for s in mig}


def test_mig_instances_are_numbered_as_the_driver_places_them() -> None:
    samples = scrape("dcgm-3-h100", make_node("a100-mig-0", "mig"))
    ids = {
        (s.labels["gpu"], s.labels["GPU_I_PROFILE"], s.labels["GPU_I_ID"])
        for s in samples
        if s.name == core.FB_USED
    }
    assert ids >= {("0", "1g.10gb", "7"), ("0", "1g.10gb", "8"), ("0", "2g.20gb", "3")}
    assert ("0", "3g.40gb", "1") in ids
    readings = core.readings_from_samples(samples)
    assert len({r.series.device_key for r in readings}) == 8  # 4 instances × 2 GPUs


def test_exporter_target_labels_mean_nobody_and_hosts_resolve_from_the_cluster() -> None:
    labels = {
        "UUID": UUIDS[0],
        "gpu": "0",
        "hostname": "nvidia-dcgm-exporter-x1y2z",
        "namespace": "gpu-operator",
        "pod": "nvidia-dcgm-exporter-x1y2z",
    }
    exporters = frozenset({("gpu-operator", "nvidia-dcgm-exporter-x1y2z")})
    series = core.series_identity(labels, exporters)
    assert (series.namespace, series.pod, series.scrape_pod) == (
        "",
        "",
        "nvidia-dcgm-exporter-x1y2z",
    )
    # Without the targets, the exporter's pod would look like a workload's.
    assert core.series_identity(labels).pod == "nvidia-dcgm-exporter-x1y2z"
    resolver = core.NodeResolver(
        nodes=frozenset({"h100-0", "h100-1"}),
        exporter_pods={"nvidia-dcgm-exporter-x1y2z": "h100-0"},
        pod_nodes={("team-a", "train-0"): "h100-1"},
        uuid_nodes={UUIDS[1]: "h100-1"},
    )
    assert resolver.node_of(series) == "h100-0"
    nameless = core.series_identity({"UUID": UUIDS[1], "gpu": "1"})
    assert resolver.node_of(nameless) == "h100-1"
    owned = core.series_identity(
        {"UUID": "GPU-unknown", "gpu": "0", "namespace": "team-a", "pod": "train-0"}
    )
    assert resolver.node_of(owned) == "h100-1"
    assert resolver.node_of(core.series_identity({"UUID": "x", "Hostname": "h100-0"})) == "h100-0"


@pytest.mark.parametrize("rule_test", RULE_TESTS, ids=lambda p: p.name)
def test_recording_rules_pass_their_promtool_tests(rule_test: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not found (Debian package `prometheus`)", pytrace=False)
    done = subprocess.run(
        [promtool, "test", "rules", str(rule_test)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
