"""The real chain: kubesim pods → DCGM simulator → Prometheus → ingestion → accounting, idle
policy and views. Nothing is mocked; windows are seconds instead of minutes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster, GpuClass
from apps.orchestration import services as orchestration
from apps.orchestration.clusters import forget_clients
from apps.telemetry import services
from apps.telemetry.models import IdleNotice, IdlePolicy, UsageDay, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    MembershipFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.plugins.prometheus import prom_query
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.prometheus, pytest.mark.django_db]


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def prometheus(prometheus_settings: str, settings: Any) -> Iterator[PrometheusClient]:
    settings.TELEMETRY_INGEST_SECONDS = 1
    client = PrometheusClient(prometheus_settings)
    yield client
    client.close()


def make_team(core_api: k8s.CoreV1Api, *classes: GpuClass) -> Team:
    team = TeamFactory()
    for gpu_class in classes:
        TeamQuotaFactory(team=team, gpu_class=gpu_class, guaranteed_milli=4000, limit_milli=8000)
    orchestration.team_namespace_ensure(team=team)
    return team


@pytest.fixture
def core_api(kube_api_client: Any) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(kube_api_client)


@pytest.fixture
def cleanup(core_api: k8s.CoreV1Api) -> Iterator[list[Team]]:
    teams: list[Team] = []
    yield teams
    for team in teams:
        try:
            core_api.delete_namespace(team.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise


def provide_home_volume(core_api: k8s.CoreV1Api, workload: Workload) -> None:
    """kubesim has no storage provisioner: bind the notebook's home claim to a static volume."""
    spec = orchestration.workload_spec(workload)
    name = f"pv-{spec.namespace}-{spec.home_claim}"[:253]
    try:
        core_api.create_persistent_volume(
            k8s.V1PersistentVolume(
                metadata=k8s.V1ObjectMeta(name=name, labels={"kubesim.io/test": "true"}),
                spec=k8s.V1PersistentVolumeSpec(
                    capacity={"storage": spec.home_size},
                    access_modes=["ReadWriteOnce"],
                    host_path=k8s.V1HostPathVolumeSource(path=f"/srv/{name}"),
                    storage_class_name="",
                    claim_ref=k8s.V1ObjectReference(namespace=spec.namespace, name=spec.home_claim),
                    persistent_volume_reclaim_policy="Delete",
                ),
            )
        )
    except ApiException as exc:
        if exc.status != 409:
            raise


def start(workload: Workload, cluster: Cluster, core_api: k8s.CoreV1Api | None = None) -> None:
    orchestration.workload_reconcile(workload_id=workload.pk)
    if core_api is not None and workload.kind == wl.KIND_NOTEBOOK:
        provide_home_volume(core_api, workload)

    def running() -> bool:
        orchestration.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state == wl.RUNNING

    try:
        wait_for(running)
    except AssertionError:
        raise AssertionError(f"{workload} is not running: {workload.last_reason}") from None


def test_idle_notebook_is_warned_then_suspended_and_busy_one_is_not(
    cluster: Cluster,
    core_api: k8s.CoreV1Api,
    prometheus: PrometheusClient,
    cleanup: list[Team],
) -> None:
    h100 = GpuClassFactory()
    team = make_team(core_api, h100)
    cleanup.append(team)
    IdlePolicy.objects.create(
        team=team,
        threshold_percent=5,
        warn_after=timedelta(seconds=2),
        suspend_after=timedelta(seconds=4),
    )
    image = ImageFactory(
        name="nb", kind="notebook", reference="quay.io/jupyter/base-notebook:2024-12-02"
    )
    owner = UserFactory()

    def notebook(profile: str) -> Workload:
        return WorkloadFactory(
            team=team,
            owner=owner,
            gpu_class=h100,
            image=image,
            kind=wl.KIND_NOTEBOOK,
            priority_class="development",
            state=wl.ADMITTED,
            placement={"replicas": [{"node": "h100-1"}]},
            params={"pod_annotations": {"kubesim.io/gpu-utilisation": profile}},
        )

    idle, busy = notebook("idle"), notebook("busy")
    start(idle, cluster, core_api)
    start(busy, cluster, core_api)
    # The simulator reports both pods, renamed to exported_* by the scrape.
    wait_for(
        lambda: len(
            prom_query(
                prometheus.url,
                f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace="{team.namespace}"}}',
            )
        )
        == 2
    )

    def suspended() -> bool:
        services.telemetry_ingest(client=prometheus)
        idle.refresh_from_db()
        return idle.state == wl.SUSPENDED

    wait_for(suspended, every=1.0)
    kinds = list(
        IdleNotice.objects.filter(workload=idle)
        .order_by("created_at")
        .values_list("kind", flat=True)
    )
    assert kinds == [IdleNotice.Kind.WARNED, IdleNotice.Kind.SUSPENDED]
    assert "your files are kept" in idle.last_reason
    assert "resume in one click" in idle.last_reason
    busy.refresh_from_db()
    assert busy.state == wl.RUNNING
    assert not IdleNotice.objects.filter(workload=busy).exists()
    usage = WorkloadUsage.objects.get(workload=busy)
    assert usage.last_utilisation is not None and usage.last_utilisation >= 0.85
    assert usage.used_gpu_seconds > 0
    assert usage.used_gpu_seconds <= usage.allocated_gpu_seconds
    assert WorkloadUsage.objects.get(workload=idle).used_gpu_seconds < 0.05 * (
        WorkloadUsage.objects.get(workload=idle).allocated_gpu_seconds
    )


def test_shared_gpu_usage_is_split_per_pod_without_crossing_teams(
    cluster: Cluster,
    core_api: k8s.CoreV1Api,
    prometheus: PrometheusClient,
    cleanup: list[Team],
) -> None:
    l40s = GpuClass.objects.create(
        name="L40S-48GB",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
    )
    busy_team, idle_team = make_team(core_api, l40s), make_team(core_api, l40s)
    cleanup.extend([busy_team, idle_team])

    def job(team: Team, profile: str) -> Workload:
        return WorkloadFactory(
            team=team,
            gpu_class=l40s,
            gpu_milli=250,
            state=wl.ADMITTED,
            placement={"replicas": [{"node": "l40s-ts-1"}]},
            params={
                "pod_annotations": {
                    "kubesim.io/run-duration": "10m",
                    "kubesim.io/gpu-utilisation": profile,
                }
            },
        )

    busy, idle = job(busy_team, "busy"), job(idle_team, "idle")
    start(busy, cluster)
    start(idle, cluster)

    def one_gpu_two_teams() -> bool:
        series = prom_query(prometheus.url, 'DCGM_FI_DEV_GPU_UTIL{Hostname="l40s-ts-1"}')
        held = [s["metric"] for s in series if s["metric"].get("exported_pod")]
        namespaces = {m["exported_namespace"] for m in held}
        return {busy_team.namespace, idle_team.namespace} <= namespaces and len(
            {m["UUID"] for m in held}
        ) == 1

    wait_for(one_gpu_two_teams)
    time.sleep(2)
    services.telemetry_ingest(client=prometheus)
    time.sleep(2)
    services.telemetry_ingest(client=prometheus)

    busy_usage = WorkloadUsage.objects.get(workload=busy)
    idle_usage = WorkloadUsage.objects.get(workload=idle)
    assert busy_usage.last_utilisation is not None and busy_usage.last_utilisation >= 0.85
    assert idle_usage.last_utilisation is not None and idle_usage.last_utilisation <= 0.05
    # Each team's accounting holds its own workload only, at a quarter GPU.
    assert set(UsageDay.objects.filter(team=busy_team).values_list("workload", flat=True)) == {
        busy.pk
    }
    assert set(UsageDay.objects.filter(team=idle_team).values_list("workload", flat=True)) == {
        idle.pk
    }
    day = UsageDay.objects.get(workload=idle)
    assert day.used_gpu_seconds <= 0.05 * day.allocated_gpu_seconds

    # The views read the same chain: the heat map links the GPU to the workload the viewer
    # may see; the outsider's page shows the GPU but not the other team's workload.
    lead = UserFactory()
    MembershipFactory(user=lead, team=busy_team, role=Membership.Role.LEAD)
    browser = Client()
    browser.force_login(lead)
    page = browser.get("/usage/heatmap/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "l40s-ts-1" in html
    assert f"/usage/workloads/{busy.pk}/" in html
    assert f"/usage/workloads/{idle.pk}/" not in html
    chart = browser.get(f"/usage/workloads/{busy.pk}/series.json")
    assert chart.status_code == 200
    data = chart.json()
    assert data["utilisation"] and max(v for v in data["utilisation"] if v is not None) >= 85
    assert browser.get(f"/usage/workloads/{idle.pk}/series.json").status_code == 404


def test_node_health_reports_every_simulated_node_against_the_inventory(
    cluster: Cluster, prometheus: PrometheusClient
) -> None:
    orchestration.cluster_inventory_sync(cluster=cluster)
    reports = {r.hostname: r for r in services.node_health_refresh(client=prometheus)}
    h100 = reports["h100-0"]
    assert (h100.gpu_count, h100.expected_gpu_count) == (8, 8)
    assert h100.verdict == "ok", h100.problems
    assert h100.models_seen == "NVIDIA H100 80GB HBM3"
    assert h100.memory_mib == 81559
    assert h100.cluster_node is not None
    # A MIG node reports its GPUs once each, whatever the instances.
    mig = next(r for name, r in reports.items() if name.startswith("a100-mig"))
    assert mig.gpu_count == mig.expected_gpu_count
