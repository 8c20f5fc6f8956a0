"""A data scientist's day on real pods, the notebook half: a member asks for a notebook on an
L4, opens it through the portal in Chromium (the portal's ticket and auth endpoint, the dev
gateway in place of ingress-nginx, JupyterLab serving in the pod on a real node), runs a cell
over the kernel's WebSocket, keeps a file in the home volume across a suspend and a resume,
is the only one let in (a teammate, an outsider and a request without cookies are not), and
the idle check sees what she does in Jupyter: her activity is recorded, and a notebook left
alone, its GPU idle, is suspended by the culler.

Requests go through the portal's doors (the REST API with a personal token, the "Open" link);
the workers' passes are run by ``drive()`` and by the telemetry pass itself, against a real
Prometheus scraping the simulated GPUs' exporter.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client
from kubernetes import client as k8s
from playwright.sync_api import expect

from apps.accounts.models import Team, User
from apps.catalog.models import GpuClass, Image
from apps.telemetry import services as telemetry
from apps.telemetry.models import IdleNotice, IdlePolicy, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.workloads.models import Workload
from deploy.devtools import dev_gateway
from deploy.devtools.kubesim import Kubesim
from deploy.devtools.prometheus import Prometheus
from tests.plugins.kubesim import admin_kubeconfig
from tests.realnode.conftest import Api, Drive, pods_of, state_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode, pytest.mark.browser]

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCREENSHOT = REPO_ROOT / "var" / "journey" / "jupyterlab.png"
# Chromium takes every *.localhost name for this machine: the notebooks get a host of their
# own, apart from the portal's cookies, as in production.
NOTEBOOK_HOSTNAME = "notebooks.localhost"
JUPYTER_SECONDS = 180  # a pod's JupyterLab, and the lab in Chromium, on a loaded machine


@pytest.fixture
def gateway(
    transactional_db: None, live_server: Any, kubesim: Kubesim, settings: Any
) -> Iterator[dev_gateway.Gateway]:
    """The dev gateway routing by the cluster's Ingresses to the pods' IPs, and the portal
    (the live server) set up to publish notebooks on it and answer its auth requests."""
    server, thread = dev_gateway.start(0, kubeconfig=admin_kubeconfig(kubesim), refresh_seconds=0.5)
    # The dev gateway routes by Ingresses (ingress-nginx's part): the Ingress form of the route.
    settings.TRAFFIC_API = "ingress"
    settings.NOTEBOOK_HOST = f"http://{NOTEBOOK_HOSTNAME}:{server.server_address[1]}"
    settings.NOTEBOOK_WILDCARD_HOST = ""
    settings.PORTAL_URL = live_server.url
    settings.NOTEBOOK_AUTH_URL = f"{live_server.url}/notebooks/auth/"
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def signed_in(
    live_server: Any, browser_context_factory: Callable[..., Any]
) -> Callable[[User], Any]:
    """A browser context signed in to the portal as ``user`` (its session cookie: signing in
    itself is tested elsewhere)."""

    def make(user: User) -> Any:
        client = Client()
        client.force_login(user)
        context = browser_context_factory(viewport=(1440, 900))
        cookie = client.cookies["sessionid"].value
        context.add_cookies([{"name": "sessionid", "value": cookie, "url": live_server.url}])
        context.portal_session = cookie
        return context

    return make


def notebook_body(gpu_class: GpuClass, image: Image) -> dict[str, Any]:
    return {
        "kind": "notebook",
        "name": "day-lab",
        "gpu_class": gpu_class.name,
        "image": image.name,
        "gpu_milli": 1000,
    }


def ready_pod(kube_api_client: k8s.ApiClient, workload: Workload) -> Any:
    """The notebook's pod once it is Ready (JupyterLab answers its readiness probe)."""
    for pod in pods_of(kube_api_client, workload):
        if pod.metadata.deletion_timestamp is not None:
            continue
        conditions = {c.type: c.status for c in pod.status.conditions or []}
        if conditions.get("Ready") == "True":
            return pod
    return None


def running_and_ready(kube_api_client: k8s.ApiClient, workload_id: int) -> Callable[[], Any]:
    def running_and_serving() -> Any:
        workload = Workload.objects.get(pk=workload_id)
        return workload.state == "running" and ready_pod(kube_api_client, workload)

    return running_and_serving


def gateway_client(gateway: dev_gateway.Gateway, cookies: list[dict[str, Any]]) -> httpx.Client:
    """An HTTP client to the notebook host through the gateway, with a browser's cookies for
    that host (and none of the portal's). Chromium resolves *.localhost itself; this client
    connects to the gateway's address and names the notebook host in ``Host``."""
    port = gateway.server_address[1]
    sent = "; ".join(
        f"{c['name']}={c['value']}" for c in cookies if c["domain"].lstrip(".") == NOTEBOOK_HOSTNAME
    )
    headers = {"Host": f"{NOTEBOOK_HOSTNAME}:{port}"}
    if sent:
        headers["Cookie"] = sent
    return httpx.Client(
        base_url=f"http://127.0.0.1:{port}",
        headers=headers,
        timeout=60,
        follow_redirects=False,
        trust_env=False,
    )


def mark_gpu_idle(kube_api_client: k8s.ApiClient, pod: Any) -> None:
    """The simulated GPU's utilisation is the exporter's input (deploy/devtools/dcgm_sim.py):
    the notebook's program leaves its GPU alone."""
    k8s.CoreV1Api(kube_api_client).patch_namespaced_pod(
        pod.metadata.name,
        pod.metadata.namespace,
        {"metadata": {"annotations": {"kubesim.io/gpu-utilisation": "idle"}}},
    )


def run_cell(page: Any, code: str, expected: str) -> None:
    """Type ``code`` into the notebook's last cell, run it, and see ``expected`` in its output
    (the kernel's answer over its WebSocket, through the gateway)."""
    page.locator(".jp-Notebook .jp-Cell .cm-content").last.click()
    page.keyboard.type(code)
    page.keyboard.press("Shift+Enter")
    expect(page.locator(".jp-OutputArea-output", has_text=expected).first).to_be_visible(
        timeout=JUPYTER_SECONDS * 1000
    )


def test_a_data_scientists_day_with_a_notebook(
    team: Team,
    member: User,
    teammate: User,
    outsider: User,
    l4: GpuClass,
    catalog: dict[str, Image],
    api: Api,
    drive: Drive,
    gateway: dev_gateway.Gateway,
    signed_in: Callable[[User], Any],
    live_server: Any,
    kube_api_client: k8s.ApiClient,
    prometheus_server: Prometheus,
    settings: Any,
    tmp_path: Path,
) -> None:
    owner_api = api(member)

    # 1. She asks for a notebook on an L4; it runs, JupyterLab serving in its pod.
    response = owner_api.post("/api/v1/workloads/", notebook_body(l4, catalog["notebook"]), "json")
    assert response.status_code == 201, response.json()
    notebook_id = response.json()["id"]
    pod = drive(running_and_ready(kube_api_client, notebook_id), timeout=300, every=2.0)
    path = f"/notebooks/{team.namespace}/{notebook_id}/"
    nb_base = f"{settings.NOTEBOOK_HOST}{path}"
    # The gateway routes by the Ingress the portal made, to the ready pod's IP.
    wait_for(lambda: gateway.refresh().match(NOTEBOOK_HOSTNAME, path), timeout=30)

    # 2. "Open notebook" through the portal: a ticket, a cookie for the notebook's path, the
    # portal asked about every request; JupyterLab loads and a kernel runs a cell.
    owner = signed_in(member)
    page = owner.new_page()
    page.goto(f"{live_server.url}/workloads/{notebook_id}/open/")
    page.wait_for_url(re.compile(re.escape(f"{nb_base}lab")), timeout=JUPYTER_SECONDS * 1000)
    launcher = page.locator(".jp-LauncherCard[data-category='Notebook']").first
    launcher.click(timeout=JUPYTER_SECONDS * 1000)
    idle = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
    expect(page.locator(idle)).to_be_attached(timeout=JUPYTER_SECONDS * 1000)
    # What the idle check has recorded of her so far.
    telemetry.notebook_activity_refresh()
    before = WorkloadUsage.objects.get(workload_id=notebook_id).jupyter_last_activity
    assert before is not None, "the portal read Jupyter's activity"
    time.sleep(1.5)
    run_cell(page, "print(6 * 7)", "42")
    shot = tmp_path / "jupyterlab.png"
    page.screenshot(path=str(shot))
    RELEASE_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, RELEASE_SCREENSHOT)

    # 5a. The idle check sees her work in Jupyter: the recorded last activity moved.
    telemetry.notebook_activity_refresh()
    after = WorkloadUsage.objects.get(workload_id=notebook_id).jupyter_last_activity
    assert after is not None and after > before

    # 4. Nobody else gets in: a teammate and an outsider, signed in to the portal, are
    # refused by it; a request without cookies is sent to sign in.
    for person, refused in ((teammate, 403), (outsider, 404)):
        other = signed_in(person)
        other_page = other.new_page()
        opened = other_page.goto(f"{live_server.url}/workloads/{notebook_id}/open/")
        assert opened is not None and opened.status == refused
        # Straight to the notebook: the gateway sends them to the portal's sign-in, which
        # refuses them.
        answer = other_page.goto(f"{nb_base}lab")
        assert answer is not None and answer.status == refused, other_page.url
        assert other_page.url.startswith(f"{live_server.url}/notebooks/signin/")
        assert "jp-" not in other_page.content()
        # Their portal session on the notebook host: the portal says no to it, too.
        other.add_cookies([{"name": "sessionid", "value": other.portal_session, "url": nb_base}])
        answer = other_page.goto(f"{nb_base}api/contents")
        assert answer is not None and answer.status == 403
        assert "content" not in answer.text()
    with gateway_client(gateway, []) as stranger:
        answer = stranger.get(f"{path}lab")
        assert answer.status_code == 302
        assert answer.headers["location"].startswith(f"{live_server.url}/notebooks/signin/?rd=")
        assert stranger.get(f"{path}api/contents").status_code == 302

    # 3. A file saved in her home volume survives a suspend and a resume.
    words = f"kept across suspend and resume by {member.username}\n"
    with gateway_client(gateway, owner.cookies()) as jupyter:
        root = jupyter.get(f"{path}api/contents")
        assert root.status_code == 200, root.text
        assert "work" in [item["name"] for item in root.json()["content"]]
        saved = jupyter.put(
            f"{path}api/contents/work/day.txt",
            json={"type": "file", "format": "text", "content": words},
        )
        assert saved.status_code in (200, 201), saved.text
    first_pod = pod.metadata.uid
    suspended = owner_api.post(f"/api/v1/workloads/{notebook_id}/suspend/")
    assert suspended.status_code == 200, suspended.json()
    drive(
        lambda: state_of(notebook_id) == "suspended"
        and not pods_of(kube_api_client, Workload.objects.get(pk=notebook_id)),
        timeout=180,
        every=2.0,
    )
    with gateway_client(gateway, owner.cookies()) as jupyter:
        gone = jupyter.get(f"{path}api/contents/work/day.txt")
        assert gone.status_code != 200  # no Jupyter while it is suspended
    resumed = owner_api.post(f"/api/v1/workloads/{notebook_id}/resume/")
    assert resumed.status_code == 200, resumed.json()
    pod = drive(running_and_ready(kube_api_client, notebook_id), timeout=300, every=2.0)
    assert pod.metadata.uid != first_pod
    wait_for(
        lambda: (route := gateway.refresh().match(NOTEBOOK_HOSTNAME, path)) is not None
        and route.backend is not None
        and any(a[0] == pod.status.pod_ip for a in route.backend.addresses),
        timeout=30,
    )
    with gateway_client(gateway, owner.cookies()) as jupyter:
        kept = jupyter.get(f"{path}api/contents/work/day.txt", params={"format": "text"})
        assert kept.status_code == 200, kept.text
        assert kept.json()["content"] == words
    owner.close()  # she goes home; the lab's polling stops

    # 5b. Left alone, its GPU idle: the idle check suspends it (a short policy for the team).
    mark_gpu_idle(kube_api_client, pod)
    settings.PROMETHEUS_URL = prometheus_server.url
    settings.TELEMETRY_ENABLED = True
    IdlePolicy.objects.create(
        team=team,
        warn_after=timedelta(seconds=1),
        suspend_after=timedelta(seconds=2),
        flag_after=timedelta(seconds=1),
    )
    prometheus = PrometheusClient(prometheus_server.url)
    try:

        def culled() -> bool:
            telemetry.telemetry_ingest(client=prometheus)
            return state_of(notebook_id) == "suspended"

        wait_for(culled, timeout=120, every=2.0)
    finally:
        prometheus.close()
    notice = IdleNotice.objects.get(workload_id=notebook_id, kind=IdleNotice.Kind.SUSPENDED)
    assert "idle" in notice.message
    usage = WorkloadUsage.objects.get(workload_id=notebook_id)
    assert usage.jupyter_last_activity is not None
    assert usage.jupyter_last_activity < notice.created_at
