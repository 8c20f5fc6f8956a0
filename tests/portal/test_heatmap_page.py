"""The heat map page: each physical GPU a box with its MIG instances inside, who holds every GPU
(an unmeasured one too), and each node's exporter coverage."""

from __future__ import annotations

from typing import Any

import pytest

from apps.telemetry import core
from apps.telemetry.models import WorkloadUsage
from apps.workloads import core as wl
from tests.portal.conftest import Portal


class FakePrometheus:
    def __init__(self, series: dict[str, list[dict[str, Any]]]) -> None:
        self.series = series

    def query(self, promql: str) -> list[dict[str, Any]]:
        return next((rows for name, rows in self.series.items() if name in promql), [])

    def close(self) -> None:
        pass


def vector(labels: dict[str, str], value: float) -> dict[str, Any]:
    return {
        "metric": {"Hostname": "h100-0", "modelName": "NVIDIA A30", **labels},
        "value": [0, str(value)],
    }


def test_gpus_are_boxes_with_their_holder_and_the_node_its_coverage(
    portal: Portal, monkeypatch: pytest.MonkeyPatch
) -> None:
    dark = portal.workload(name="dark-run", state=wl.RUNNING)
    namespace = portal.cast.team.namespace
    WorkloadUsage.objects.create(workload=dark, pods=[[namespace, "dark-run-0"]])
    held = {"gpu": "0", "UUID": "GPU-0", "namespace": namespace, "pod": "dark-run-0"}
    mig = {"gpu": "1", "UUID": "GPU-1", "GPU_I_ID": "3", "GPU_I_PROFILE": "2g.12gb"}
    prometheus = FakePrometheus(
        {
            core.FB_USED: [vector(held, 2048), vector(mig, 1024)],
            core.GR_ENGINE_ACTIVE: [vector(mig, 0.5)],
        }
    )
    monkeypatch.setattr("apps.web.views.telemetry.default_client", lambda: prometheus)

    html = portal.client(portal.cast.teammate).get("/usage/heatmap/").content.decode()
    assert html.count('class="heat-gpu"') == 2
    # The A30's 2g instance fills half of its GPU's box; the other half is drawn as a gap.
    assert "heat-grow-2 heat-" in html and "heat-gap heat-grow-2" in html
    # Unmeasured, but its holder is shown: the workload and its team.
    assert "n/d" in html and f"/usage/workloads/{dark.pk}/" in html
    assert f"dark-run</a> · {portal.cast.team.name}" in html
    assert "1 of 2 GPUs measured (1 report memory only)" in html

    # Someone of another team sees who holds it by team, not the workload.
    other = portal.client(portal.cast.outsider).get("/usage/heatmap/").content.decode()
    assert f"a workload of {portal.cast.team.name}" in other
    assert "dark-run" not in other and f"/usage/workloads/{dark.pk}/" not in other
