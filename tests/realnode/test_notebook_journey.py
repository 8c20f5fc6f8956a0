"""A data scientist's day on real pods, the notebook half: a member asks for a notebook on an
L4, opens it through the portal in Chromium (the portal's ticket; the notebook's HTTPRoute on
the platform's Gateway, served by Traefik, whose forwardAuth asks the portal about every
request; JupyterLab serving in the pod on a real node), runs a cell over the kernel's
WebSocket, uploads 50 MB, keeps a file in the home volume across a suspend and a resume, is the
only one let in besides an admin (a teammate, an outsider, a request without cookies, a
replayed ticket, a forged cookie and her teammate's cookie are not; no path traversal reaches
her teammate's notebook, and Traefik's router and the portal's answer agree on every one),
and the idle check sees what she does in Jupyter: her activity is recorded, and a notebook
left alone, its GPU idle, is suspended by the culler.

Requests go through the portal's doors (the REST API with a personal token, the "Open" link);
the workers' passes are run by ``drive()`` and by the telemetry pass itself, against a real
Prometheus scraping the simulated GPUs' exporter.
"""

from __future__ import annotations

import base64
import contextlib
import os
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
from apps.orchestration import services
from apps.orchestration.manifests import NOTEBOOK_COOKIE_PREFIX
from apps.orchestration.manifests.routes import UNKNOWN_NOTEBOOK
from apps.telemetry import services as telemetry
from apps.telemetry.models import IdleNotice, IdlePolicy, WorkloadUsage
from apps.telemetry.prom import PrometheusClient
from apps.workloads.models import Workload
from deploy.devtools import traefik
from deploy.devtools.prometheus import Prometheus
from tests.factories import UserFactory
from tests.realnode.conftest import Api, Drive, pods_of, route_served, state_of
from tests.traversals import TRAVERSALS
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode, pytest.mark.browser]

REPO_ROOT = Path(__file__).resolve().parents[2]
RELEASE_SCREENSHOT = REPO_ROOT / "var" / "journey" / "jupyterlab.png"
# Chromium takes every *.localhost name for this machine: the notebooks get a host of their
# own, apart from the portal's cookies, as in production.
NOTEBOOK_HOSTNAME = "notebooks.localhost"
JUPYTER_SECONDS = 180  # a pod's JupyterLab, and the lab in Chromium, on a loaded machine
UPLOAD_BYTES = 50 * 1024 * 1024
UPLOAD_CHUNK = 1024 * 1024  # JupyterLab's chunk for files over 15 MB


@pytest.fixture
def notebook_gateway(
    transactional_db: None, live_server: Any, gateway: traefik.Traefik, settings: Any
) -> traefik.Traefik:
    """The portal (the live server) publishing notebooks on Traefik's Gateway, on the notebook
    host at Traefik's port, and answering the forwardAuth of every route."""
    settings.NOTEBOOK_HOST = f"http://{NOTEBOOK_HOSTNAME}:{gateway.port}"
    settings.NOTEBOOK_WILDCARD_HOST = ""
    settings.PORTAL_URL = live_server.url
    settings.NOTEBOOK_AUTH_URL = f"{live_server.url}/notebooks/auth/"
    return gateway


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


def notebook_body(gpu_class: GpuClass, image: Image, name: str = "day-lab") -> dict[str, Any]:
    return {
        "kind": "notebook",
        "name": name,
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


def gateway_client(gateway: traefik.Traefik, cookies: list[dict[str, Any]]) -> httpx.Client:
    """An HTTP client to the notebook host through the gateway, with a browser's cookies for
    that host (and none of the portal's). Chromium resolves *.localhost itself; this client
    connects to the gateway's address and names the notebook host in ``Host``."""
    port = gateway.port
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


def portal_session(user: User) -> str:
    client = Client()
    client.force_login(user)
    return str(client.cookies["sessionid"].value)


def open_url(live_server: Any, user: User, notebook_id: int) -> httpx.Response:
    """The portal's "Open" for ``user``, not followed: a redirect to the notebook with a
    one-time ticket for the owner and admins."""
    with httpx.Client(
        base_url=live_server.url,
        cookies={"sessionid": portal_session(user)},
        follow_redirects=False,
        trust_env=False,
    ) as web:
        return web.get(f"/workloads/{notebook_id}/open/")


def ticket_path(opened: httpx.Response) -> str:
    assert opened.status_code == 302, opened.text
    return httpx.URL(opened.headers["location"]).raw_path.decode()


@contextlib.contextmanager
def enter(
    gateway: traefik.Traefik, live_server: Any, user: User, notebook_id: int
) -> Iterator[httpx.Client]:
    """A client that went in as ``user`` the way a browser does: "Open" in the portal, the
    ticket to the notebook through the gateway, the access cookie the portal set on the way
    back; it then sends that cookie only."""
    client = gateway_client(gateway, [])
    answer = client.get(ticket_path(open_url(live_server, user, notebook_id)))
    assert answer.status_code in (200, 302), answer.text
    assert "/notebooks/signin/" not in answer.headers.get("location", "")
    name = f"{NOTEBOOK_COOKIE_PREFIX}{notebook_id}"
    cookies = [c.split(";", 1)[0] for c in answer.headers.get_list("set-cookie")]
    (cookie,) = [c for c in cookies if c.startswith(f"{name}=")]
    client.headers["Cookie"] = cookie
    try:
        yield client
    finally:
        client.close()


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
    notebook_gateway: traefik.Traefik,
    signed_in: Callable[[User], Any],
    live_server: Any,
    kube_api_client: k8s.ApiClient,
    prometheus_server: Prometheus,
    settings: Any,
    tmp_path: Path,
) -> None:
    owner_api = api(member)
    admin = UserFactory(is_staff=True)
    # The team's namespace once more, now that notebooks are on the notebook host: with the
    # route that answers for its notebook ids that do not exist.
    services.team_namespace_ensure(team=team)

    # 1. She asks for a notebook on an L4, her teammate for one of his; they run, JupyterLab
    # serving in their pods.
    response = owner_api.post("/api/v1/workloads/", notebook_body(l4, catalog["notebook"]), "json")
    assert response.status_code == 201, response.json()
    notebook_id = response.json()["id"]
    theirs = api(teammate).post(
        "/api/v1/workloads/", notebook_body(l4, catalog["notebook"], "bobs-lab"), "json"
    )
    assert theirs.status_code == 201, theirs.json()
    teammate_id = theirs.json()["id"]
    pod = drive(running_and_ready(kube_api_client, notebook_id), timeout=300, every=2.0)
    drive(running_and_ready(kube_api_client, teammate_id), timeout=300, every=2.0)
    path = f"/notebooks/{team.namespace}/{notebook_id}/"
    their_path = f"/notebooks/{team.namespace}/{teammate_id}/"
    nb_base = f"{settings.NOTEBOOK_HOST}{path}"
    notebook_host = f"{NOTEBOOK_HOSTNAME}:{notebook_gateway.port}"
    # Each has an HTTPRoute on the Gateway, accepted by Traefik, and a forwardAuth Middleware
    # that asks the portal about that very notebook.
    custom = k8s.CustomObjectsApi(kube_api_client)
    for workload_id in (notebook_id, teammate_id):
        route = custom.get_namespaced_custom_object(
            "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", f"wl-{workload_id}"
        )
        assert route["spec"]["hostnames"] == [NOTEBOOK_HOSTNAME]
        assert route["spec"]["parentRefs"][0]["name"] == traefik.GATEWAY_NAME
        (extension,) = [
            f for f in route["spec"]["rules"][0]["filters"] if f["type"] == "ExtensionRef"
        ]
        middleware = custom.get_namespaced_custom_object(
            "traefik.io",
            "v1alpha1",
            team.namespace,
            "middlewares",
            extension["extensionRef"]["name"],
        )
        assert middleware["spec"]["forwardAuth"]["address"] == (
            f"{live_server.url}/notebooks/auth/{workload_id}/"
        )
        wait_for(
            lambda w=workload_id: traefik.route_conditions(
                kube_api_client, team.namespace, f"wl-{w}"
            ).get("Accepted")
            == "True",
            timeout=60,
        )
    wait_for(route_served(notebook_gateway, notebook_host, f"{path}lab"), timeout=60)
    wait_for(route_served(notebook_gateway, notebook_host, f"{their_path}lab"), timeout=60)

    # 2. "Open notebook" through the portal: a ticket, a cookie for the notebook's path, the
    # portal asked about every request; JupyterLab loads and a kernel runs a cell (its
    # WebSocket through Traefik).
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

    # 2b. 50 MB up through the gateway into her home volume, as JupyterLab's upload sends a
    # large file (1 MiB chunks, each a request the portal authorises), and its size read back.
    payload = os.urandom(UPLOAD_BYTES)
    chunks = range(0, UPLOAD_BYTES, UPLOAD_CHUNK)
    with enter(notebook_gateway, live_server, member, notebook_id) as jupyter:
        for number, offset in enumerate(chunks, start=1):
            chunk = payload[offset : offset + UPLOAD_CHUNK]
            uploaded = jupyter.put(
                f"{path}api/contents/work/big.bin",
                json={
                    "type": "file",
                    "format": "base64",
                    "chunk": -1 if number == len(chunks) else number,
                    "content": base64.b64encode(chunk).decode(),
                },
            )
            assert uploaded.status_code in (200, 201), (number, uploaded.text[:500])
        stat = jupyter.get(f"{path}api/contents/work/big.bin", params={"content": "0"})
        assert stat.status_code == 200, stat.text[:500]
        assert stat.json()["size"] == UPLOAD_BYTES
    del payload

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
    with gateway_client(notebook_gateway, []) as stranger:
        answer = stranger.get(f"{path}lab")
        assert answer.status_code == 302
        assert answer.headers["location"].startswith(f"{live_server.url}/notebooks/signin/?rd=")
        assert stranger.get(f"{path}api/contents").status_code == 302
        # A script's write without access: 401, not a redirect.
        written = stranger.post(f"{path}api/contents/work")
        assert written.status_code == 401
        # A notebook id that does not exist is answered the same (the team's route for the
        # rest of its notebook paths asks the portal), so the gateway tells no one which exist.
        unknown = path.replace(f"/{notebook_id}/", f"/{notebook_id + 1000}/")
        gone = stranger.get(f"{unknown}lab")
        assert gone.status_code == 302, gone.text
        assert gone.headers["location"].startswith(f"{live_server.url}/notebooks/signin/?rd=")
        gone_write = stranger.post(f"{unknown}api/contents/work")
        assert (gone_write.status_code, gone_write.text) == (401, written.text)
    # An admin goes in with a ticket of his own.
    with enter(notebook_gateway, live_server, admin, notebook_id) as admin_jupyter:
        listed = admin_jupyter.get(f"{path}api/contents/work")
        assert listed.status_code == 200, listed.text
        assert "big.bin" in [item["name"] for item in listed.json()["content"]]

    # 4b. Tickets and cookies: a ticket used once is spent; a forged cookie and her teammate's
    # cookie (on her notebook's name, or on his notebook) are refused.
    spent = ticket_path(open_url(live_server, member, notebook_id))
    with (
        gateway_client(notebook_gateway, []) as first,
        gateway_client(notebook_gateway, []) as again,
    ):
        assert first.get(spent).status_code in (200, 302)
        replayed = again.get(spent)
        assert replayed.status_code == 302
        assert "/notebooks/signin/" in replayed.headers["location"]
    with enter(notebook_gateway, live_server, teammate, teammate_id) as bob:
        words = f"only {teammate.username} reads this\n"
        wrote = bob.put(
            f"{their_path}api/contents/work/bob.txt",
            json={"type": "file", "format": "text", "content": words},
        )
        assert wrote.status_code in (200, 201), wrote.text
        bobs_cookie = bob.headers["Cookie"].split("=", 1)[1]
    with enter(notebook_gateway, live_server, member, notebook_id) as alice:
        name, value = alice.headers["Cookie"].split("=", 1)
        for cookie in (f"{name}={value[:-4]}AAAA", f"{name}={bobs_cookie}"):
            with gateway_client(notebook_gateway, []) as forged:
                forged.headers["Cookie"] = cookie
                assert forged.get(f"{path}api/contents").status_code == 302, cookie
        # Her own cookie does not open his notebook.
        assert alice.get(f"{their_path}api/contents/work/bob.txt").status_code == 302

        # 4c. Every traversal from her notebook's prefix towards his: Traefik either keeps
        # it on her route (her notebook answers, never with his file) or routes it to his
        # (the portal, asked about his notebook, refuses her); never his file.
        mine = {str(notebook_id), str(teammate_id)}
        for traversal in TRAVERSALS:
            raw = f"{path}{traversal}{teammate_id}/api/contents/work/bob.txt"
            logged = len(notebook_gateway.access_entries())
            request = alice.build_request("GET", "/")
            request.url = request.url.copy_with(raw_path=raw.encode())
            answer = alice.send(request)
            assert words.strip() not in answer.text, (traversal, answer.status_code)
            # Its line in Traefik's access log: the router that took it, the status sent.
            entry = wait_for(
                lambda n=logged: (e := notebook_gateway.access_entries()[n:]) and e[-1],
                timeout=10,
            )
            router = re.search(r"wl-(\d+)", entry.get("RouterName", ""))
            served_by = router.group(1) if router else None
            assert served_by is None or served_by in mine, entry
            if served_by == str(teammate_id):
                assert entry["DownstreamStatus"] in (302, 401, 403), (traversal, entry)
            if served_by is None and UNKNOWN_NOTEBOOK in entry.get("RouterName", ""):
                # No notebook's route: the team's route for paths naming none; never in.
                assert entry["DownstreamStatus"] in (302, 401, 403), (traversal, entry)
            elif served_by is None:
                assert entry["DownstreamStatus"] in (400, 404), (traversal, entry)

    # 3. A file saved in her home volume survives a suspend and a resume.
    words = f"kept across suspend and resume by {member.username}\n"
    with gateway_client(notebook_gateway, owner.cookies()) as jupyter:
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
    with gateway_client(notebook_gateway, owner.cookies()) as jupyter:
        gone = jupyter.get(f"{path}api/contents/work/day.txt")
        assert gone.status_code != 200  # no Jupyter while it is suspended
    resumed = owner_api.post(f"/api/v1/workloads/{notebook_id}/resume/")
    assert resumed.status_code == 200, resumed.json()
    pod = drive(running_and_ready(kube_api_client, notebook_id), timeout=300, every=2.0)
    assert pod.metadata.uid != first_pod
    # Traefik follows the new pod's address (the route itself stayed).
    with gateway_client(notebook_gateway, owner.cookies()) as jupyter:
        wait_for(lambda: jupyter.get(f"{path}api/contents").status_code == 200, timeout=60)
    with gateway_client(notebook_gateway, owner.cookies()) as jupyter:
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
