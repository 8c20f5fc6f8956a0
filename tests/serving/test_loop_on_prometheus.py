"""The scaling loop on the real chain: an endpoint's replicas on the simulated cluster, the
DCGM simulator's utilisation for its pods, Prometheus, and the loop's own query. Nothing is
mocked: a busy endpoint that scales on GPU utilisation is asked for more replicas, and the
next scheduling cycle admits them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster
from apps.orchestration import services as orchestration
from apps.scheduling.services import scheduling_cycle_run
from apps.serving.autoscaling import autoscale_pass
from apps.serving.models import EndpointSample
from apps.telemetry.prom import PrometheusClient
from apps.workloads import core as wl
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from deploy.devtools import dcgm_sim
from deploy.devtools import prometheus as prom
from deploy.devtools.kubesim import Kubesim
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import core_api  # noqa: F401 - the fixture
from tests.plugins.prometheus import prom_query, start_dcgm_sim, start_prometheus, stop_process
from tests.telemetry.test_chain import (  # noqa: F401 - the fixtures
    cleanup,
    cluster,
    exporter_pods,
    make_team,
    prometheus,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.prometheus, pytest.mark.django_db]


@pytest.fixture(scope="module")
def chain(
    kubesim: Kubesim,
    exporter_pods: dict[str, str],  # noqa: F811 - the fixture
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dcgm_sim.ExporterProfile, prom.Prometheus]]:
    """The simulator as the platform's own node agent exports (one variant is enough here: the
    exporter variants have their own chain tests), and a Prometheus scraping it."""
    exporter = dcgm_sim.EXPORTERS["agent"]
    directory = tmp_path_factory.mktemp("serving-chain")
    address, process = start_dcgm_sim(str(kubesim.kubeconfig), directory, exporter.name)
    try:
        server = start_prometheus(address, directory / "prometheus")
        try:
            yield exporter, server
        finally:
            server.stop()
    finally:
        stop_process(process)


def test_a_busy_endpoint_scaling_on_gpu_utilisation_gets_more_replicas(
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    prometheus: PrometheusClient,  # noqa: F811 - the fixture
    cleanup: list[Team],  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    settings.SERVING_SCALE_COOLDOWN_SECONDS = 0
    h100 = GpuClassFactory()
    orchestration.cluster_inventory_sync(cluster=cluster)
    team = make_team(core_api, h100)
    cleanup.append(team)
    lead = UserFactory()
    team.memberships.create(user=lead, role=Membership.Role.LEAD)
    endpoint = workload_submit(
        actor=lead,
        team=team,
        gpu_class=h100,
        image=ImageFactory(name="vLLM", reference="docker.io/vllm/vllm:1", kind="serving"),
        request=WorkloadRequest.of(
            kind=wl.KIND_INFERENCE,
            name="busy-llm",
            gpu_milli=1000,
            params={"pod_annotations": {"kubesim.io/gpu-utilisation": "busy"}},
            endpoint={
                "model_path": "/team/models/llama",
                "max_replicas": 3,
                "scale_metric": "gpu",
                "scale_target": 30,
            },
        ),
    )
    scheduling_cycle_run()
    orchestration.workload_reconcile(workload_id=endpoint.pk)

    def running() -> bool:
        orchestration.status_sync_pass(cluster=cluster)
        endpoint.refresh_from_db()
        return endpoint.state == wl.RUNNING

    wait_for(running)
    wait_for(
        lambda: prom_query(
            prometheus.url, f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{team.namespace}"}}'
        ),
        timeout=60,
    )

    result = autoscale_pass()
    assert result.errors == []
    sample = EndpointSample.objects.get(workload=endpoint)
    assert sample.gpu_utilisation is not None and sample.gpu_utilisation >= 85
    # Busy (85–100 %) on one replica for a target of 30 % per replica: three, the maximum.
    assert result.scaled == [(endpoint.pk, 3)]
    assert "GPU utilisation" in sample.decision
    run = scheduling_cycle_run()
    assert run.scaled == (endpoint.pk,)
    endpoint.refresh_from_db()
    assert endpoint.replicas == 3
