"""Opening a notebook in the development setup: "Open notebook" goes through the same
authenticated route as production (a one-time ticket, the portal's auth endpoint asked on
every request, a cookie for the notebook's path) to a page the notebook's address serves —
the development gateway in place of ingress-nginx, routing by the notebook's own Ingress, and
its stand-in page in place of Jupyter (the simulated nodes run no containers)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from apps.accounts.models import User
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from deploy.devtools import dev_gateway
from deploy.devtools.kubesim import Kubesim
from tests.browser.conftest import Platform
from tests.plugins.kubesim import admin_kubeconfig
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.kubesim, pytest.mark.oidc]


@pytest.fixture
def gateway(platform: Platform, kubesim: Kubesim, settings: Any) -> Iterator[dev_gateway.Gateway]:
    # The notebook's pod is on a simulated node, which runs no containers: the stand-in page.
    server, thread = dev_gateway.start(
        0, kubeconfig=admin_kubeconfig(kubesim), stand_in=True, refresh_seconds=0.5
    )
    # Chromium takes every *.localhost name for this machine: the notebooks get a host of
    # their own, apart from the portal's cookies, as in production.
    # The dev gateway routes by Ingresses (ingress-nginx's part): the Ingress form of the route.
    settings.TRAFFIC_API = "ingress"
    settings.NOTEBOOK_HOST = server.url.replace("127.0.0.1", "notebooks.localhost")
    settings.PORTAL_URL = platform.url
    settings.NOTEBOOK_AUTH_URL = f"{platform.url}/notebooks/auth/"
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_open_notebook_reaches_a_page_through_the_authenticated_route(
    platform: Platform, gateway: dev_gateway.Gateway, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    platform.sign_in(page, "alice")
    alice = User.objects.get(username="alice")
    notebook = workload_submit(
        actor=alice,
        team=platform.vision,
        gpu_class=platform.classes["mig"],
        image=platform.images["notebook"],
        request=WorkloadRequest.of(
            kind="notebook", name="alice-lab", gpu_milli=250, replicas=1, command=[]
        ),
    )
    try:
        wait_for(lambda: Workload.objects.get(pk=notebook.pk).state == "running", timeout=60)
    except AssertionError:
        seen = Workload.objects.get(pk=notebook.pk)
        problem = f"{seen.state}: {seen.last_reason}; {platform.loop.errors[-3:]}"
        raise AssertionError(problem) from None
    path = f"/notebooks/{platform.vision.namespace}/{notebook.pk}/"
    nb_url = gateway.url.replace("127.0.0.1", "notebooks.localhost")
    # The gateway routes by the Ingress the portal made for the notebook.
    wait_for(lambda: gateway.refresh().match(nb_url.split("//")[1], path), timeout=30)
    page.goto(f"{platform.url}/workloads/{notebook.pk}/")
    # It opens in a new tab, as a notebook should.
    with page.context.expect_page() as opened:
        page.get_by_role("link", name="Open notebook").click()
    portal_page, page = page, opened.value
    page.js_errors = []
    page.wait_for_load_state()

    try:
        expect(page.get_by_role("heading", name="Notebook")).to_be_visible()
    except AssertionError:
        raise AssertionError(f"{page.url}: {page.locator('body').inner_text()}") from None
    ticket_url = page.url
    assert ticket_url.startswith(f"{nb_url}{path}?gpupaas-ticket=")
    expect(page.locator("#token-state")).to_have_text(
        "The portal handed over this notebook's token."
    )
    expect(page.locator("#backend")).to_contain_text(
        f"{platform.vision.namespace}/wl-{notebook.pk}:80"
    )
    platform.screenshot(page, "notebook-open-dev")
    # The ticket is spent; the cookie the portal set for the notebook's path lets her back in.
    page.goto(f"{nb_url}{path}lab")
    expect(page.locator("#token-state")).to_contain_text("handed over")

    # A teammate is sent to sign in, then refused; a stranger with no session, to sign in.
    teammate = new_page()
    platform.sign_in(teammate, "bob")
    response = teammate.goto(f"{nb_url}{path}")
    assert response is not None and response.status == 403
    stranger = new_page()
    stranger.goto(f"{nb_url}{path}")
    expect(stranger).to_have_url(re.compile(r"/accounts/login/"))
    # The ticket in the URL alice was sent to cannot be used a second time.
    replay = new_page()
    replay.goto(ticket_url)
    expect(replay).to_have_url(re.compile(r"/accounts/login/"))
    assert portal_page.js_errors == []
