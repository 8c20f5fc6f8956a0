"""The whole platform for browser tests: the live Django server on the test database, signed
in through the real OpenID provider, and a loop in this process that does what the Celery
workers do (scheduling cycle, reconcile, status sync) against the simulated cluster."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import close_old_connections, connection
from django.test import Client
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster, GpuClass, Image
from apps.orchestration import services as orchestration
from apps.orchestration.clusters import forget_clients
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from deploy.devtools.kubesim import Kubesim
from tests.plugins.oidc import OIDCProvider
from tests.portal.conftest import portal as portal  # the catalog fixture, for page tests

log = logging.getLogger(__name__)
REPO_ROOT = Path(__file__).resolve().parents[2]
LOOP_SECONDS = 0.5
NOTEBOOK_HOST = "notebooks.gpupaas.test"


class PlatformLoop(threading.Thread):
    """Every ``LOOP_SECONDS``: a scheduling cycle, a reconcile pass and a status sync."""

    def __init__(self, cluster_id: int) -> None:
        super().__init__(name="platform-loop", daemon=True)
        self.cluster_id = cluster_id
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.passes = 0

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                close_old_connections()
                try:
                    scheduling_cycle_run()
                    cluster = Cluster.objects.get(pk=self.cluster_id)
                    orchestration.reconcile_pass(cluster=cluster)
                    orchestration.status_sync_pass(cluster=cluster)
                except Exception as exc:  # keep looping; the test reports what went wrong
                    log.exception("platform loop pass failed")
                    self.errors.append(repr(exc))
                self.passes += 1
                self.stopping.wait(LOOP_SECONDS)
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)


@dataclass
class Platform:
    url: str
    oidc: OIDCProvider
    cluster: Cluster
    vision: Team
    nlp: Team
    classes: dict[str, GpuClass]
    images: dict[str, Image]
    loop: PlatformLoop
    artifacts: Path
    kube: k8s.CoreV1Api
    screenshots: list[Path] = field(default_factory=list)

    def sign_in(self, page: Any, username: str, next_path: str = "/") -> None:
        """Sign in through the provider's own login form, as a person would."""
        page.goto(f"{self.url}/accounts/login/?next={next_path}")
        page.get_by_role("link", name="Sign in with").click()
        page.locator("#login").fill(username)
        page.locator("#password").fill(self.oidc.user(username).password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{self.url}{next_path}*")

    def screenshot(self, page: Any, name: str, *, docs: bool = False) -> Path:
        path = self.artifacts / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.screenshots.append(path)
        if docs and os.environ.get("GPUPAAS_UPDATE_DOCS_SCREENSHOTS") == "1":
            shutil.copyfile(path, REPO_ROOT / "docs" / "images" / f"{name}.png")
        return path


def _classes() -> dict[str, GpuClass]:
    h100 = GpuClass.objects.create(
        name="H100-80GB",
        product_label="NVIDIA-H100-80GB-HBM3",
        memory_mib=81559,
        sharing_mode="whole",
        hourly_cost=Decimal("4.5"),
    )
    mig = GpuClass.objects.create(
        name="A100-80GB-MIG",
        product_label="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        sharing_mode="mig",
        mig_profiles=["1g.10gb", "2g.20gb", "3g.40gb"],
        hourly_cost=Decimal("2.9"),
    )
    l40s = GpuClass.objects.create(
        name="L40S-48GB",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
        hourly_cost=Decimal("1.8"),
    )
    return {"h100": h100, "mig": mig, "l40s": l40s}


@pytest.fixture
def platform(
    transactional_db: None,
    live_server: Any,
    settings: Any,
    oidc_provider: OIDCProvider,
    kubesim: Kubesim,
    kube_api_client: Any,
    artifacts_dir: Path,
) -> Iterator[Platform]:
    for key, value in oidc_provider.django_settings().items():
        setattr(settings, key, value)
    settings.OIDC_ENABLED = True
    settings.NOTEBOOK_HOST = NOTEBOOK_HOST
    # As the settings require with a notebook host: the gateway asks the portal about every
    # request (without it no route is made: a notebook is never published unguarded).
    settings.NOTEBOOK_AUTH_URL = f"{live_server.url}/notebooks/auth/"
    settings.OIDC_ADMIN_GROUPS = ["gpupaas-admins"]
    settings.AUTHENTICATION_BACKENDS = [
        "apps.accounts.oidc.GpupaasOIDCBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    forget_clients()
    suffix = uuid.uuid4().hex[:6]  # each test its own namespaces on the shared cluster
    vision = Team.objects.create(
        name="Vision",
        slug="vision",
        namespace=f"team-vision-{suffix}",
        idp_group="gpupaas-team-vision",
    )
    nlp = Team.objects.create(
        name="NLP",
        slug="nlp",
        namespace=f"team-nlp-{suffix}",
        idp_group="gpupaas-team-nlp",
    )
    classes = _classes()
    # Vision: a full H100 guarantee of 8 (limit 8: no borrowing) and two MIG GPUs.
    TeamQuota.objects.create(
        team=vision, gpu_class=classes["h100"], guaranteed_milli=8000, limit_milli=8000
    )
    TeamQuota.objects.create(
        team=vision, gpu_class=classes["mig"], guaranteed_milli=2000, limit_milli=4000
    )
    TeamQuota.objects.create(
        team=nlp, gpu_class=classes["h100"], guaranteed_milli=8000, limit_milli=16000
    )
    images = {
        "notebook": Image.objects.create(
            name="PyTorch notebook",
            reference="quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02",
            kind=Image.Kind.NOTEBOOK,
        ),
        "training": Image.objects.create(
            name="PyTorch training",
            reference="nvcr.io/nvidia/pytorch:24.12-py3",
            kind=Image.Kind.TRAINING,
        ),
    }
    cluster = Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))
    orchestration.cluster_inventory_sync(cluster=cluster)
    orchestration.team_namespace_ensure(team=vision)
    orchestration.team_namespace_ensure(team=nlp)
    loop = PlatformLoop(cluster.pk)
    loop.start()
    result = Platform(
        url=live_server.url,
        oidc=oidc_provider,
        cluster=cluster,
        vision=vision,
        nlp=nlp,
        classes=classes,
        images=images,
        loop=loop,
        artifacts=artifacts_dir,
        kube=k8s.CoreV1Api(kube_api_client),
    )
    try:
        yield result
    finally:
        loop.stop()
        core = k8s.CoreV1Api(kube_api_client)
        for team in (vision, nlp):
            try:
                core.delete_namespace(team.namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        forget_clients()


@pytest.fixture
def new_page(
    browser_context_factory: Callable[..., Any],
) -> Callable[..., Any]:
    """A page in a fresh context (own cookies) that fails the test on a JavaScript error."""

    def make(**kwargs: Any) -> Any:
        context = browser_context_factory(**kwargs)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.js_errors = errors
        return page

    return make


@pytest.fixture
def signed_in(
    transactional_db: None,
    live_server: Any,
    browser_context_factory: Callable[..., Any],
) -> Callable[..., Any]:
    """A page signed in as ``user`` (by session cookie: sign-in itself is tested elsewhere),
    against the live server without a cluster (pages that only read the database)."""

    def make(user: Any, viewport: tuple[int, int] = (1280, 800)) -> Any:
        client = Client()
        client.force_login(user)
        context = browser_context_factory(viewport=viewport)
        context.add_cookies(
            [
                {
                    "name": "sessionid",
                    "value": client.cookies["sessionid"].value,
                    "url": live_server.url,
                }
            ]
        )
        page = context.new_page()
        page.base_url = live_server.url
        return page

    return make
