"""Real JupyterLab through the development gateway, in headless Chromium: the lab loads, a
notebook's kernel runs a cell over its WebSocket, the notebook is saved (PUT), and an outsider
is refused — every request authorised by the (stand-in) portal, as ingress-nginx would.

JupyterLab is no dependency of the project: the test runs when ``JUPYTER`` names a ``jupyter``
command with jupyterlab and ipykernel (e.g. ``python -m venv /tmp/jl &&
/tmp/jl/bin/pip install jupyterlab`` then ``JUPYTER=/tmp/jl/bin/jupyter``), and skips
otherwise.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from deploy.devtools import dev_gateway as gw
from tests.deploy.test_dev_gateway import (
    NOTEBOOK_ID,
    NOTEBOOK_TOKEN,
    FakePortal,
    portal_objects,
    running_gateway,
    serving,
)
from tests.waiting import wait_for

NAMESPACE = "team-vision"
HOST = "notebooks.localhost"  # Chromium takes every *.localhost name for this machine


@pytest.fixture
def jupyterlab(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """JupyterLab serving ``tmp_path`` under the notebook's base URL with the notebook's
    token, as the portal's StatefulSet starts it; its port and root."""
    jupyter = os.environ.get("JUPYTER", "")
    if not jupyter:
        pytest.skip("set JUPYTER to a jupyter command with jupyterlab and ipykernel")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    root = tmp_path / "work"
    root.mkdir()
    log = (tmp_path / "jupyterlab.log").open("wb")
    process = subprocess.Popen(
        [
            jupyter,
            "lab",
            "--no-browser",
            "--allow-root",
            f"--ServerApp.base_url=/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/",
            "--ServerApp.ip=127.0.0.1",
            # In the pod it listens on 0.0.0.0, which lets any Host in; on loopback it would
            # refuse the notebook host the gateway passes on.
            "--ServerApp.allow_remote_access=True",
            f"--ServerApp.port={port}",
            f"--ServerApp.root_dir={root}",
            f"--IdentityProvider.token={NOTEBOOK_TOKEN}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return process.poll() is not None  # it ended: fail below, not by timeout
        return True

    try:
        wait_for(listening, timeout=180)
        if process.poll() is not None:
            raise AssertionError((tmp_path / "jupyterlab.log").read_text()[-2000:])
        yield port, root
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


def test_jupyterlab_runs_a_cell_and_saves_through_the_gateway(
    jupyterlab: tuple[int, Path], browser_context_factory: Callable[..., Any]
) -> None:
    port, root = jupyterlab
    with serving(FakePortal()) as portal, running_gateway() as gateway:
        objects = portal_objects(NAMESPACE, portal.url, port, hosts=(HOST, "endpoints.localhost"))
        gateway.publish(gw.routes_from_objects(*objects))
        base = f"http://{HOST}:{gateway.server_address[1]}/notebooks/{NAMESPACE}/{NOTEBOOK_ID}/"
        context = browser_context_factory()
        context.add_cookies([{"name": "session", "value": "alice", "url": base}])
        page = context.new_page()
        page.goto(f"{base}lab")
        page.locator(".jp-LauncherCard[data-category='Notebook']").first.click(timeout=120_000)
        page.locator(".jp-Cell .cm-content").first.click()
        idle = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
        expect(page.locator(idle)).to_be_attached(timeout=60_000)
        page.keyboard.type("print(6 * 7)")
        page.keyboard.press("Shift+Enter")
        # The kernel answered over its WebSocket, through the gateway.
        expect(page.locator(".jp-OutputArea-output").first).to_contain_text("42", timeout=60_000)
        page.locator(".lm-MenuBar-itemLabel", has_text="File").click()
        page.locator(".lm-Menu-itemLabel", has_text="Save Notebook").first.click()
        page.get_by_role("button", name="Rename").click()

        def saved() -> bool:
            return any("42" in p.read_text() for p in root.glob("*.ipynb"))

        wait_for(saved, timeout=20)
        asked = [{k.lower(): v for k, v in e["headers"]} for e in portal.seen()]
        upgrades = [a for a in asked if "/channels?" in a.get("x-original-url", "")]
        assert upgrades, "the kernel's WebSocket upgrade was authorised too"
        assert len(asked) > 20  # every request, not once per connection
        # Another person's session on the same notebook: refused, by the portal's answer.
        context.add_cookies([{"name": "session", "value": "bob", "url": base}])
        response = page.goto(f"{base}api/contents")
        assert response is not None and response.status == 403
        context.close()  # before the gateway stops under its open connections
