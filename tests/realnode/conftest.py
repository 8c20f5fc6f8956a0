"""A data scientist's day on real nodes: the portal, its API and its workers' passes against a
kubesim cluster whose real nodes run the pods (``KUBESIM_REAL_NODES=1``).

Requests go through the portal's own doors (the REST API with a personal token, or the
portal's pages); what the Celery workers would do between two looks is done by ``drive()``:
one scheduling cycle, one reconcile pass and one status sync pass, the same services the
beat tasks call. Nothing of Kubernetes is mocked: the pods run JupyterLab, the training
program and the model server of the catalog images (deploy/images).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from rest_framework.test import APIClient

from apps.accounts.models import Membership, Team, User
from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster, GpuClass, Image
from apps.common.ratelimit import rate_limiter
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads.models import Workload
from deploy.devtools import traefik
from deploy.devtools.kubesim import Kubesim
from tests.factories import TeamFactory, TeamQuotaFactory, UserFactory
from tests.plugins.kubesim import admin_kubeconfig
from tests.waiting import wait_for

# The real pool of deploy/kubesim/topologies/realnodes.yaml: 3 nodes × 2 simulated L4s.
REAL_PRODUCT = "NVIDIA-L4"
NOTEBOOK_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02"
TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:24.12-py3"
SERVING_IMAGE = "docker.io/vllm/vllm-openai:v0.6.4"
ROOT_IMAGE = "gpupaas.local/runs-as-root:1"


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> Iterator[None]:
    rate_limiter().reset()
    yield
    rate_limiter().reset()


@pytest.fixture
def real_cluster(kubesim: Kubesim, real_nodes: list[dict[str, Any]], db: None) -> Cluster:
    """The cluster as the portal knows it, its nodes read from Kubernetes."""
    forget_clients()
    cluster = Cluster.objects.create(name="real", kubeconfig_path=str(kubesim.kubeconfig))
    services.cluster_inventory_sync(cluster=cluster)
    return cluster


@pytest.fixture
def l4(real_cluster: Cluster) -> GpuClass:
    """The GPU class of the real nodes (whole GPUs)."""
    gpu_class, _ = GpuClass.objects.get_or_create(
        name="L4-24GB",
        defaults={
            "product_label": REAL_PRODUCT,
            "memory_mib": 23034,
            "sharing_mode": GpuClass.Sharing.WHOLE,
            "hourly_cost": "0.80",
            "capacity_gpus": 6,
        },
    )
    services.cluster_inventory_sync(cluster=real_cluster)
    return gpu_class


@pytest.fixture
def catalog(db: None) -> dict[str, Image]:
    """The catalog images the real nodes hold (built by deploy/devtools/images.py)."""
    images = {}
    for key, name, reference, kind in (
        ("notebook", "PyTorch notebook", NOTEBOOK_IMAGE, Image.Kind.NOTEBOOK),
        ("training", "PyTorch training", TRAINING_IMAGE, Image.Kind.TRAINING),
        ("serving", "vLLM server", SERVING_IMAGE, Image.Kind.SERVING),
        ("root", "Runs as root", ROOT_IMAGE, Image.Kind.ANY),
    ):
        images[key], _ = Image.objects.update_or_create(
            name=name, defaults={"reference": reference, "kind": kind}
        )
    return images


@pytest.fixture
def team(real_cluster: Cluster, l4: GpuClass, kube_api_client: k8s.ApiClient) -> Iterator[Team]:
    """A team with 4 guaranteed L4s (limit 6), its namespace made by the portal."""
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=l4, guaranteed_milli=4000, limit_milli=6000)
    services.team_namespace_ensure(team=team)
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(
            team.namespace, propagation_policy="Background"
        )
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def member(team: Team) -> User:
    user = UserFactory()
    team.memberships.create(user=user)
    return user


@pytest.fixture
def lead(team: Team) -> User:
    user = UserFactory()
    team.memberships.create(user=user, role=Membership.Role.LEAD)
    return user


@pytest.fixture
def teammate(team: Team) -> User:
    user = UserFactory()
    team.memberships.create(user=user)
    return user


@pytest.fixture
def outsider(db: None) -> User:
    return UserFactory()


Api = Callable[..., APIClient]


@pytest.fixture
def api(db: None) -> Api:
    """``api(user)``: an APIClient holding a fresh personal token of ``user`` (write scope)."""

    def make(user: User, scopes: tuple[str, ...] = ("write",)) -> APIClient:
        _, plaintext = api_token_create(
            actor=user, name=f"journey {'+'.join(scopes)}", scopes=list(scopes), expires_at=None
        )
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        return c

    return make


Drive = Callable[..., Any]


@pytest.fixture
def drive(real_cluster: Cluster) -> Drive:
    """``drive(until, timeout=…, what=…)``: run what the workers run (a scheduling cycle, a
    reconcile pass, a status sync pass) until ``until()`` returns something truthy."""

    def step() -> None:
        scheduling_cycle_run()
        services.reconcile_pass(cluster=real_cluster)
        services.status_sync_pass(cluster=real_cluster)

    def run(until: Callable[[], Any], timeout: float = 180.0, every: float = 1.0) -> Any:
        def check() -> Any:
            step()
            return until()

        check.__qualname__ = getattr(until, "__qualname__", "drive")
        return wait_for(check, timeout=timeout, every=every)

    return run


def state_of(workload_id: int) -> str:
    return Workload.objects.get(pk=workload_id).state


def pods_of(kube_api_client: k8s.ApiClient, workload: Workload) -> list[Any]:
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    return list(
        k8s.CoreV1Api(kube_api_client)
        .list_namespaced_pod(workload.team.namespace, label_selector=selector)
        .items
    )


@pytest.fixture(autouse=True)
def _short_waits(settings: Any) -> None:
    """Minimum runtimes of zero (a test does not wait 10 minutes before a preemption may
    happen), and replicas that ask for a quarter of a core and 512 MiB besides their GPUs (the
    real nodes have the machine's 2 cores); everything else as configured."""
    settings.WORKLOAD_CPU_MILLI = 250
    settings.WORKLOAD_MEMORY_MIB = 512
    settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = 0
    settings.SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS = 0
    settings.SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = 0


@pytest.fixture
def gateway(
    kubesim: Kubesim, settings: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[traefik.Traefik]:
    """Traefik, the development cluster's Gateway API implementation, serving the platform's
    Gateway on a free loopback port (its access log kept, one JSON object per request); the
    portal writes HTTPRoutes on it (TRAFFIC_API=gateway-api, the default) whose forwardAuth
    asks the portal about every request."""
    settings.TRAFFIC_API = "gateway-api"
    settings.GATEWAY_IMPLEMENTATION = "traefik"
    settings.GATEWAY_NAME = traefik.GATEWAY_NAME
    settings.GATEWAY_NAMESPACE = traefik.GATEWAY_NAMESPACE
    settings.GATEWAY_LISTENER = ""
    work = tmp_path_factory.mktemp("traefik")
    with traefik.running(admin_kubeconfig(kubesim), work, access_log=True) as proxy:
        yield proxy
        assert proxy.running(), proxy.log_tail()


def route_served(proxy: traefik.Traefik, host: str, path: str) -> Callable[[], bool]:
    """Whether Traefik serves a route for ``path`` on ``host`` yet: anything but its own 404
    (an unauthorised request is answered by the portal's 302 or 401 once the route is in)."""

    def served() -> bool:
        with httpx.Client(base_url=proxy.url, headers={"Host": host}, timeout=10) as web:
            return web.get(path, follow_redirects=False).status_code != 404

    return served


__all__ = ["Api", "Drive", "pods_of", "route_served", "state_of"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The node-death journey kills a kubelet of the session's cluster: it runs after the other
    journeys, so they have all the real nodes. The browser journeys run last of all: the
    session's Playwright keeps an event loop running in the main thread, where Django's
    async-to-sync views (the log stream) then refuse to run."""

    def rank(item: pytest.Item) -> int:
        if not item.nodeid.startswith("tests/realnode/"):
            return 0
        if item.get_closest_marker("browser") is not None:
            return 2
        if any(m.args == ("node-death",) for m in item.iter_markers("xdist_group")):
            return 1
        return 0

    items.sort(key=rank)  # stable: the order within each rank stays, other tests come first
