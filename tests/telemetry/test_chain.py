"""The real chain: kubesim pods → DCGM simulator → Prometheus → ingestion → accounting, idle
policy and views. Nothing is mocked; windows are seconds instead of minutes.

Every test runs once per exporter variant the simulator imitates (``dcgm_sim.EXPORTERS``: the
project's agent, dcgm-exporter 3.x and 4.x on H100, A30 MIG and RTX nodes), each with a
simulator and a Prometheus of its own. The cluster runs one exporter pod per GPU node
(``app=nvidia-dcgm-exporter`` in ``gpu-operator``), whose names 4.x puts in its host label."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster, GpuClass
from apps.orchestration import services as orchestration
from apps.orchestration.clusters import forget_clients
from apps.telemetry import core, services
from apps.telemetry.models import IdleNotice, IdlePolicy, UsageDay, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.telemetry.selectors import heatmap, top_idle_cost, usage_totals
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools import dcgm_sim
from deploy.devtools import prometheus as prom
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
from tests.plugins.prometheus import prom_query, start_dcgm_sim, start_prometheus, stop_process
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.prometheus, pytest.mark.django_db]


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


EXPORTER_NAMESPACE = "gpu-operator"


@pytest.fixture(scope="module")
def exporter_pods(kube_api_client: Any, kubesim: Kubesim) -> dict[str, str]:
    """One dcgm-exporter pod per GPU node, as the GPU Operator's DaemonSet runs them (node →
    pod name); kubesim's kubelet runs them."""
    core_api = k8s.CoreV1Api(kube_api_client)
    try:
        core_api.create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=EXPORTER_NAMESPACE))
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    wait_for(lambda: bool(core_api.list_namespaced_service_account(EXPORTER_NAMESPACE).items))
    existing = core_api.list_namespaced_pod(
        EXPORTER_NAMESPACE, label_selector="app=nvidia-dcgm-exporter"
    ).items
    pods = {p.spec.node_name: p.metadata.name for p in existing}
    for node in core_api.list_node(label_selector="nvidia.com/gpu.present=true").items:
        if node.metadata.name in pods:
            continue
        name = f"nvidia-dcgm-exporter-{uuid.uuid4().hex[:5]}"
        core_api.create_namespaced_pod(
            EXPORTER_NAMESPACE,
            k8s.V1Pod(
                metadata=k8s.V1ObjectMeta(name=name, labels={"app": "nvidia-dcgm-exporter"}),
                spec=k8s.V1PodSpec(
                    node_name=node.metadata.name,
                    tolerations=[k8s.V1Toleration(operator="Exists")],
                    containers=[
                        k8s.V1Container(
                            name="nvidia-dcgm-exporter",
                            image="nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04",
                        )
                    ],
                ),
            ),
        )
        pods[node.metadata.name] = name
    return pods


@pytest.fixture(scope="module", params=sorted(dcgm_sim.EXPORTERS))
def chain(
    request: pytest.FixtureRequest,
    kubesim: Kubesim,
    exporter_pods: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dcgm_sim.ExporterProfile, prom.Prometheus]]:
    """The simulator imitating one exporter variant, and a Prometheus scraping it."""
    exporter = dcgm_sim.EXPORTERS[request.param]
    directory: Path = tmp_path_factory.mktemp(f"chain-{exporter.name}")
    address, process = start_dcgm_sim(str(kubesim.kubeconfig), directory, exporter.name)
    try:
        server = start_prometheus(address, directory / "prometheus")
        try:
            yield exporter, server
        finally:
            server.stop()
    finally:
        stop_process(process)


@pytest.fixture
def exporter(chain: tuple[dcgm_sim.ExporterProfile, prom.Prometheus]) -> dcgm_sim.ExporterProfile:
    return chain[0]


@pytest.fixture
def prometheus(
    chain: tuple[dcgm_sim.ExporterProfile, prom.Prometheus], settings: Any
) -> Iterator[PrometheusClient]:
    url = chain[1].url
    settings.PROMETHEUS_URL = url
    settings.TELEMETRY_ENABLED = True
    settings.TELEMETRY_INGEST_SECONDS = 1
    client = PrometheusClient(url)
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
    exporter: dcgm_sim.ExporterProfile,
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

    orchestration.cluster_inventory_sync(cluster=cluster)  # node names for the heat map
    busy, idle = job(busy_team, "busy"), job(idle_team, "idle")
    start(busy, cluster)
    start(idle, cluster)

    def one_gpu_two_teams() -> bool:
        series = prom_query(
            prometheus.url,
            f'DCGM_FI_DEV_GPU_UTIL{{exported_namespace=~"{busy_team.namespace}|{idle_team.namespace}"}}',
        )
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
    assert busy_usage.last_utilisation is not None and idle_usage.last_utilisation is not None
    if exporter.accounting_label:
        # Per-pod accounting: each pod is credited with its own use.
        assert busy_usage.last_utilisation >= 0.85
        assert idle_usage.last_utilisation <= 0.05
    else:
        # dcgm-exporter repeats the device's value on each pod's series: the device's use is
        # split between its pods by allocation, never more than the device did in all.
        assert busy_usage.last_utilisation == pytest.approx(idle_usage.last_utilisation, abs=0.2)
        # A quarter GPU each: together they are credited what the device did, at most
        # 0.25 × 100 % (busy) + 0.25 × 2 % (idle) of one GPU.
        used = 0.25 * (busy_usage.last_utilisation + idle_usage.last_utilisation)
        assert used <= 0.26
    # Each team's accounting holds its own workload only, at a quarter GPU.
    assert set(UsageDay.objects.filter(team=busy_team).values_list("workload", flat=True)) == {
        busy.pk
    }
    assert set(UsageDay.objects.filter(team=idle_team).values_list("workload", flat=True)) == {
        idle.pk
    }
    day = UsageDay.objects.get(workload=idle)
    if exporter.accounting_label:
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
    assert data["utilisation"]
    if exporter.accounting_label:
        assert max(v for v in data["utilisation"] if v is not None) >= 85
    assert browser.get(f"/usage/workloads/{idle.pk}/series.json").status_code == 404


def test_node_health_reports_every_simulated_node_against_the_inventory(
    cluster: Cluster,
    prometheus: PrometheusClient,
    exporter: dcgm_sim.ExporterProfile,
    exporter_pods: dict[str, str],
) -> None:
    orchestration.cluster_inventory_sync(cluster=cluster)
    reports = {r.hostname: r for r in services.node_health_refresh(client=prometheus)}
    # Named as the cluster names its nodes, whatever the exporter's host label says (the
    # node, the exporter pod's name, or nothing).
    inventory = set(cluster.nodes.values_list("name", flat=True))
    assert set(reports) == inventory
    if exporter.host_is_exporter_pod:
        assert reports["h100-0"].reported_as == [exporter_pods["h100-0"]]
    h100 = reports["h100-0"]
    assert (h100.gpu_count, h100.expected_gpu_count) == (8, 8)
    assert h100.verdict == "ok", h100.problems
    assert h100.models_seen == "NVIDIA H100 80GB HBM3"
    assert h100.memory_mib == 81559
    assert h100.cluster_node is not None
    # A MIG node reports its GPUs once each, whatever the instances.
    mig = next(r for name, r in reports.items() if name.startswith("a100-mig"))
    assert mig.gpu_count == mig.expected_gpu_count


def test_unmeasured_gpus_are_no_data_never_idle_never_unused_never_culled(
    cluster: Cluster,
    core_api: k8s.CoreV1Api,
    prometheus: PrometheusClient,
    exporter: dcgm_sim.ExporterProfile,
    cleanup: list[Team],
) -> None:
    if not exporter.unmeasured:
        pytest.skip(f"the {exporter.name} exporter measures every GPU (no unmeasured node)")
    orchestration.cluster_inventory_sync(cluster=cluster)
    h100 = GpuClassFactory()
    team = make_team(core_api, h100)
    cleanup.append(team)
    IdlePolicy.objects.create(
        team=team,
        threshold_percent=5,
        warn_after=timedelta(seconds=1),
        suspend_after=timedelta(seconds=2),
        flag_after=timedelta(seconds=1),
    )
    image = ImageFactory(
        name="nb", kind="notebook", reference="quay.io/jupyter/base-notebook:2024-12-02"
    )
    # The pod would read idle (0-2 %) if its GPU were measured; h100-3's GPUs are not.
    dark = WorkloadFactory(
        team=team,
        gpu_class=h100,
        image=image,
        kind=wl.KIND_NOTEBOOK,
        priority_class="development",
        state=wl.ADMITTED,
        placement={"replicas": [{"node": "h100-3"}]},
        params={"pod_annotations": {"kubesim.io/gpu-utilisation": "idle"}},
    )
    start(dark, cluster, core_api)
    wait_for(
        lambda: bool(
            prom_query(
                prometheus.url,
                f'DCGM_FI_DEV_FB_USED{{exported_namespace="{team.namespace}"}}',
            )
        )
    )
    for _ in range(4):
        time.sleep(1.2)
        result = services.telemetry_ingest(client=prometheus)
        assert dark.pk not in result.warned + result.suspended + result.flagged
    dark.refresh_from_db()
    assert dark.state == wl.RUNNING  # never culled
    assert not IdleNotice.objects.filter(workload=dark).exists()
    usage = WorkloadUsage.objects.get(workload=dark)
    assert usage.last_utilisation is None
    assert usage.idle_since is None
    assert usage.measured_seconds == 0
    assert usage.allocated_gpu_seconds > 0
    # Billed as allocated, never as unused: no measured hours, so no idle cost.
    day = UsageDay.objects.get(workload=dark)
    assert day.allocated_gpu_seconds > 0 and day.cost > 0
    assert day.unmeasured_gpu_seconds == day.allocated_gpu_seconds
    assert day.used_gpu_seconds == 0
    first, end = day.day, day.day + timedelta(days=1)
    idle_by_team = {r["team__name"]: r["idle"] for r in top_idle_cost(first, end)}
    assert idle_by_team.get(team.name, 0) == 0
    (total,) = usage_totals(UsageDay.objects.filter(team=team), ("gpu_class__name",), first, end)
    assert total.utilisation is None and total.unmeasured_hours > 0

    # Shown as "no data": on the heat map, in the idle list (not listed) and the team page.
    lead = UserFactory()
    MembershipFactory(user=lead, team=team, role=Membership.Role.LEAD)
    nodes = {n.hostname: n for n in heatmap(prometheus, lead)}
    cells = [c for c in nodes["h100-3"].cells if c.workloads]
    assert [c.workloads for c in cells] == [[(dark.pk, dark.name)]]
    assert cells[0].utilisation is None and cells[0].reading == "no data"
    browser = Client()
    browser.force_login(lead)
    html = browser.get("/usage/heatmap/").content.decode()
    assert "heat-nodata" in html and "no data" in html
    assert f"/usage/workloads/{dark.pk}/" not in browser.get("/usage/idle/").content.decode()


def test_every_gpu_is_on_the_heat_map_and_mig_cells_carry_their_instance(
    cluster: Cluster, prometheus: PrometheusClient, exporter: dcgm_sim.ExporterProfile
) -> None:
    orchestration.cluster_inventory_sync(cluster=cluster)
    services.node_health_refresh(client=prometheus)  # records what the exporter calls nodes
    viewer = UserFactory()
    nodes = {n.hostname: n for n in heatmap(prometheus, viewer)}
    for node in cluster.nodes.all():
        assert node.name in nodes, f"{node.name} missing from the heat map"
        per_gpu = len(node.mig_layout) if node.mig_layout else 1
        expected = node.gpu_count * per_gpu
        assert len(nodes[node.name].cells) == expected, node.name
    # A node of the inventory whose exporter reports nothing still shows its GPUs: no data.
    cluster.nodes.create(name="silent-0", gpu_count=2, gpu_uuids=["GPU-silent-0", "GPU-silent-1"])
    silent = {n.hostname: n for n in heatmap(prometheus, viewer)}["silent-0"]
    assert [(c.label, c.reported, c.utilisation) for c in silent.cells] == [
        ("GPU 0", False, None),
        ("GPU 1", False, None),
    ]
    mig = next(n for name, n in nodes.items() if name.startswith("a100-mig"))
    labels = [c.label for c in mig.cells]
    assert len(set(labels)) == len(labels), labels  # every instance its own cell
    assert all(" · instance " in label for label in labels)
    if exporter.mig_ids == "placement":
        assert "GPU 0 · 1g.10gb · instance 7" in labels
        assert "GPU 0 · 3g.40gb · instance 1" in labels


def test_unowned_devices_are_attributed_to_nobody(
    cluster: Cluster, prometheus: PrometheusClient
) -> None:
    # The unowned GPUs' series carry the exporter pod's own namespace and pod labels…
    unowned = prom_query(
        prometheus.url,
        'DCGM_FI_DEV_FB_USED{namespace="gpu-operator", exported_pod=""}',
    )
    assert unowned, "the simulator reports free GPUs"
    targets = services.exporter_targets(prometheus)
    assert ("gpu-operator", unowned[0]["metric"]["pod"]) in targets
    # …which count for nobody: not for the exporter's namespace in the recording rules…
    wait_for(lambda: bool(prom_query(prometheus.url, "gpupaas:gpu_active:avg")))
    time.sleep(2)  # a few rule evaluations
    namespaces = {
        s["metric"].get("namespace")
        for s in prom_query(prometheus.url, "namespace:gpupaas_gpu_active:sum")
    }
    assert "gpu-operator" not in namespaces
    # …nor in accounting: no reading of a free GPU names a pod.
    samples = services._fetch_samples(prometheus, 10, timezone.now())
    readings = core.readings_from_samples(samples, exporters=targets)
    free = [r for r in readings if r.series.scrape_pod and not r.series.pod]
    assert free and all(r.series.namespace == "" for r in free)
