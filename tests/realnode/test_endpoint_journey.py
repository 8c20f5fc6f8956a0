"""An inference endpoint on real nodes, through the portal's own doors: a lead deploys the
serving image on the L4 class through the API, makes a key through the API, and the real model
server answers through the endpoint's route with that key; a rolling update under a stream of
calls loses none of them.

The route is the endpoint's Ingress as the portal wrote it, served by the development gateway
(deploy/devtools/dev_gateway.py: ingress-nginx's part with the same objects) started on a free
port against a live portal: the path matched by the Ingress's regex and rewritten by its
``rewrite-target``, the portal's ``auth-url`` asked before every call with the call's own
headers, the call proxied to a ready address of the backend Service's EndpointSlices (pod IPs,
which the host reaches).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from apps.accounts.models import Team, User
from apps.catalog.models import GpuClass, Image
from apps.orchestration import manifests as m
from apps.workloads.models import Workload
from deploy.devtools import dev_gateway
from deploy.devtools.kubesim import Kubesim
from tests.plugins.kubesim import admin_kubeconfig
from tests.realnode.conftest import Api, Drive, pods_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode]

ENDPOINT_HOST = "serve.gpupaas.test"


class Route:
    """Calls to one endpoint through the development gateway (ingress-nginx's part: the
    endpoint's Ingress, the portal's auth-url asked for every call, the pods' addresses from the
    EndpointSlices), as a client outside the cluster makes them."""

    def __init__(self, gateway_url: str, host: str, namespace: str, workload_id: int) -> None:
        self.base = m.endpoint_path(namespace, workload_id)
        self.http = httpx.Client(
            base_url=gateway_url, headers={"Host": host}, timeout=httpx.Timeout(60.0)
        )

    def close(self) -> None:
        self.http.close()

    def call(
        self, method: str, path: str, *, key: str | None = None, json: Any = None
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return self.http.request(method, f"{self.base}{path}", headers=headers, json=json)


@pytest.fixture
def endpoint_host(settings: Any, live_server: Any) -> str:
    """Endpoints get an Ingress on ENDPOINT_HOST whose auth-url is the live portal's."""
    # The dev gateway routes by Ingresses (ingress-nginx's part): the Ingress form of the route.
    settings.TRAFFIC_API = "ingress"
    settings.ENDPOINT_HOST = ENDPOINT_HOST
    settings.PORTAL_URL = live_server.url
    settings.ENDPOINT_AUTH_URL = f"{live_server.url}/endpoints/auth/"
    return ENDPOINT_HOST


@pytest.fixture
def gateway(kubesim: Kubesim, endpoint_host: str) -> Iterator[str]:
    """The development gateway on a free port, routing by the cluster's Ingresses (read every
    second, as often as ingress-nginx's controller syncs); its URL."""
    gw, thread = dev_gateway.start(0, kubeconfig=admin_kubeconfig(kubesim), refresh_seconds=1.0)
    try:
        yield gw.url
    finally:
        gw.shutdown()
        gw.server_close()
        thread.join(timeout=10)


def ready_pods(kube_api_client: k8s.ApiClient, workload: Workload) -> list[Any]:
    return [
        p
        for p in pods_of(kube_api_client, workload)
        if p.status.phase == "Running"
        and p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    ]


def revision_of(pod: Any) -> str:
    return str((pod.metadata.annotations or {}).get(m.ANNOTATION_REVISION))


def complete(route: Route, key: str, prompt: str, max_tokens: int = 32) -> httpx.Response:
    return route.call(
        "POST",
        "v1/completions",
        key=key,
        json={
            "model": "gpupaas-charlm",
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0,
        },
    )


@dataclass
class CallLoop:
    """Calls through the route, one after the other, from a thread, until stopped (bounded in
    count and in time); every answer's status kept."""

    route: Route
    key: str
    max_calls: int = 3000
    max_seconds: float = 420.0
    statuses: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    texts: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set() and len(self.statuses) < self.max_calls:
            if time.monotonic() - started > self.max_seconds:
                self.failures.append("the loop ran out of time before it was stopped")
                return
            try:
                answer = complete(self.route, self.key, "The scheduler", max_tokens=8)
            except httpx.HTTPError as exc:
                self.statuses.append(0)
                self.failures.append(f"{type(exc).__name__}: {exc}")
                continue
            self.statuses.append(answer.status_code)
            if answer.status_code == 200:
                self.texts.add(answer.json()["choices"][0]["text"])
            else:
                self.failures.append(f"{answer.status_code}: {answer.text[:200]}")

    @contextlib.contextmanager
    def running(self) -> Iterator[CallLoop]:
        thread = threading.Thread(target=self.run, name="endpoint-calls", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join(timeout=60)
        assert not thread.is_alive(), "the call loop did not stop"


def _deploy(api: Api, lead: User, team: Team, l4: GpuClass, serving: Image) -> Workload:
    body = {
        "kind": "inference",
        "name": "charlm",
        "team": team.slug,
        "gpu_class": l4.name,
        "image": serving.name,
        "gpu_milli": 1000,
        "endpoint": {
            "port": 8000,
            "health_path": "/health",
            "min_replicas": 1,
            "max_replicas": 2,
            "model_path": "/team/models/charlm",
        },
    }
    created = api(lead).post("/api/v1/workloads/", body, "json")
    assert created.status_code == 201, created.json()
    return Workload.objects.get(pk=created.json()["id"])


def test_the_model_server_answers_through_the_route_with_a_key_and_a_rollout_loses_no_call(
    api: Api,
    drive: Drive,
    kube_api_client: k8s.ApiClient,
    team: Team,
    lead: User,
    teammate: User,
    l4: GpuClass,
    catalog: dict[str, Image],
    endpoint_host: str,
    gateway: str,
    real_nodes: list[dict[str, Any]],
    settings: Any,
) -> None:
    endpoint = _deploy(api, lead, team, l4, catalog["serving"])
    assert (endpoint.priority_class, endpoint.replicas) == ("production", 1)

    def serving() -> list[Any]:
        endpoint.refresh_from_db()
        ready = ready_pods(kube_api_client, endpoint)
        return ready if endpoint.state == "running" and ready else []

    (pod,) = drive(serving, timeout=240, every=2)
    assert endpoint.last_reason == "1 of 1 replicas ready"
    spec = pod.spec.containers[0]
    assert spec.image == catalog["serving"].reference
    assert pod.spec.priority_class_name == "gpupaas-production"
    assert pod.spec.node_name in {n["name"] for n in real_nodes}

    keys = api(lead).post(f"/api/v1/workloads/{endpoint.pk}/keys/", {"name": "journey"}, "json")
    assert keys.status_code == 201, keys.json()
    key = keys.json()["key"]
    overview = api(teammate).get(f"/api/v1/workloads/{endpoint.pk}/endpoint/").json()
    assert overview["url"].endswith(m.endpoint_path(team.namespace, endpoint.pk))
    assert [k["name"] for k in overview["keys"]] == ["journey"]

    ingress = k8s.NetworkingV1Api(kube_api_client).read_namespaced_ingress(
        f"wl-{endpoint.pk}", team.namespace
    )
    assert ingress.spec.rules[0].host == endpoint_host
    auth_url = ingress.metadata.annotations["nginx.ingress.kubernetes.io/auth-url"]
    assert auth_url == f"{settings.ENDPOINT_AUTH_URL}{endpoint.pk}/"

    route = Route(gateway, endpoint_host, team.namespace, endpoint.pk)
    try:
        # Computed answers: greedy decoding answers the same text twice; another prompt, another.
        first = complete(route, key, "The platform")
        assert first.status_code == 200, first.text
        again = complete(route, key, "The platform")
        other = complete(route, key, "A notebook")
        text = first.json()["choices"][0]["text"]
        assert len(text) == 32 and text.strip()
        assert again.json()["choices"][0]["text"] == text
        assert other.status_code == 200, other.text
        assert other.json()["choices"][0]["text"] != text
        assert first.json()["usage"]["completion_tokens"] == 32
        models = route.call("GET", "v1/models", key=key)
        assert models.status_code == 200, models.text
        assert [mdl["id"] for mdl in models.json()["data"]] == ["gpupaas-charlm"]

        # No key, or a wrong one: the portal refuses the call before it reaches the server.
        refused = route.call("POST", "v1/completions", json={"prompt": "x"})
        assert refused.status_code == 401, refused.text
        assert refused.headers["WWW-Authenticate"] == 'Bearer realm="gpupaas endpoint"'
        wrong = complete(route, f"{key[:-4]}zzzz", "The platform")
        assert wrong.status_code == 401, wrong.text
        health = route.call("GET", "health")
        assert health.status_code == 401, health.text  # the health path is no way around it

        # A rolling update (a new environment: a new revision of the pods) under a stream of
        # calls: a new replica starts and is ready before the old one goes; none is lost.
        loop = CallLoop(route, key)
        with loop.running():
            wait_for(lambda: len(loop.statuses) >= 5, timeout=60)
            rolled = api(lead).post(
                f"/api/v1/workloads/{endpoint.pk}/rollout/",
                {"env": {"MODEL_DTYPE": "bf16"}},
                "json",
            )
            assert rolled.status_code == 200, rolled.json()
            assert rolled.json()["params"]["endpoint"]["revision"] == 2

            def rolled_out() -> bool:
                pods = pods_of(kube_api_client, endpoint)
                rollout = api(lead).get(f"/api/v1/workloads/{endpoint.pk}/endpoint/").json()
                return (
                    rollout["rollout"].get("state") == "complete"
                    and len(pods) == 1
                    and revision_of(pods[0]) == "2"
                    and pods[0].metadata.uid != pod.metadata.uid
                    and len(ready_pods(kube_api_client, endpoint)) == 1
                )

            drive(rolled_out, timeout=300, every=2)
            during = len(loop.statuses)
            # Some calls after the old replica is gone, through the new one only.
            wait_for(lambda: len(loop.statuses) >= during + 10, timeout=60)
        assert loop.failures == [], loop.failures[:5]
        assert set(loop.statuses) == {200} and len(loop.statuses) >= 20, len(loop.statuses)
        assert len(loop.texts) == 1  # the same model, greedy: the same answer from both revisions
        (new,) = ready_pods(kube_api_client, endpoint)
        env = {e.name: e.value for e in new.spec.containers[0].env}
        assert env["MODEL_DTYPE"] == "bf16" and env["GPUPAAS_PORT"] == "8000"
        assert complete(route, key, "The platform").json()["choices"][0]["text"] == text
    finally:
        route.close()
