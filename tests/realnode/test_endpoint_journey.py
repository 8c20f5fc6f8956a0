"""An inference endpoint on real nodes, through the portal's own doors: a lead deploys the
serving image on the L4 class through the API, makes a key through the API, and the real model
server answers through the endpoint's route with that key; a rolling update under a stream of
calls loses none of them; a streamed completion comes through as it is generated; a revoked
key, no key and another endpoint's key are refused, and guessing is answered 429.

The route is the endpoint's HTTPRoute as the portal wrote it, on the platform's Gateway served
by Traefik (the development cluster's Gateway API implementation) against a live portal: the
path prefix replaced by ``/`` on the way in, the portal asked before every call (Traefik's
forwardAuth, with the call's own headers and the caller's address in ``X-Forwarded-For``), the
call proxied to a ready address of the backend Service's EndpointSlices (pod IPs, which the
host reaches).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from apps.accounts.models import Team, User
from apps.catalog.models import Cluster, GpuClass, Image
from apps.common.ratelimit import rate_limiter
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.serving.autoscaling import prometheus_reading
from apps.telemetry.prom import PrometheusClient
from apps.workloads.models import Workload
from deploy.devtools import prometheus as prom
from deploy.devtools import traefik
from tests.realnode.conftest import Api, Drive, pods_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode]

ENDPOINT_HOST = "serve.gpupaas.test"
TOKEN_DELAY = 0.02  # seconds per generated character: a GPU's pace, so a stream takes a while
GUESSES = 6  # wrong keys from one address before it is answered 429


class Route:
    """Calls to one endpoint through the gateway (the endpoint's HTTPRoute, the portal's
    forwardAuth asked before every call, the pods' addresses from the EndpointSlices), as a
    client outside the cluster makes them."""

    def __init__(self, gateway_url: str, host: str, namespace: str, workload_id: int) -> None:
        self.base = m.endpoint_path(namespace, workload_id)
        self.http = httpx.Client(
            base_url=gateway_url,
            headers={"Host": host},
            timeout=httpx.Timeout(60.0),
            trust_env=False,
        )

    def close(self) -> None:
        self.http.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        key: str | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        sent = {"Authorization": f"Bearer {key}"} if key else {}
        return self.http.request(
            method, f"{self.base}{path}", headers={**sent, **(headers or {})}, json=json
        )


@pytest.fixture
def endpoint_host(settings: Any, live_server: Any, gateway: traefik.Traefik) -> str:
    """Endpoints get an HTTPRoute on ENDPOINT_HOST whose forwardAuth asks the live portal;
    the portal takes the caller's address from the one proxy in front of it (Traefik)."""
    settings.ENDPOINT_HOST = ENDPOINT_HOST
    settings.PORTAL_URL = live_server.url
    settings.ENDPOINT_AUTH_URL = f"{live_server.url}/endpoints/auth/"
    settings.TRUSTED_PROXY_COUNT = 1
    settings.ENDPOINT_KEY_GUESSES = GUESSES
    return ENDPOINT_HOST


def json_text(line: str) -> str:
    return str(json.loads(line.removeprefix("data: "))["choices"][0]["text"])


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


def _deploy(
    api: Api, lead: User, team: Team, l4: GpuClass, serving: Image, name: str = "charlm"
) -> Workload:
    body = {
        "kind": "inference",
        "name": name,
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
        "env": {"MODEL_TOKEN_DELAY_SECONDS": str(TOKEN_DELAY)},
    }
    created = api(lead).post("/api/v1/workloads/", body, "json")
    assert created.status_code == 201, created.json()
    return Workload.objects.get(pk=created.json()["id"])


def metrics_target(gateway: traefik.Traefik) -> str:
    """Where Prometheus scrapes the gateway (its /metrics)."""
    return gateway.metrics_url.removeprefix("http://").removesuffix("/metrics")


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
    gateway: traefik.Traefik,
    real_cluster: Cluster,
    real_nodes: list[dict[str, Any]],
    settings: Any,
    tmp_path: Path,
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

    # Its HTTPRoute on the Gateway, accepted by Traefik, with the portal's forwardAuth for this
    # very endpoint; and a second endpoint of the team, with a key of its own.
    custom = k8s.CustomObjectsApi(kube_api_client)
    http_route = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", team.namespace, "httproutes", f"wl-{endpoint.pk}"
    )
    assert http_route["spec"]["hostnames"] == [endpoint_host]
    (extension,) = [
        f for f in http_route["spec"]["rules"][0]["filters"] if f["type"] == "ExtensionRef"
    ]
    middleware = custom.get_namespaced_custom_object(
        "traefik.io", "v1alpha1", team.namespace, "middlewares", extension["extensionRef"]["name"]
    )
    assert middleware["spec"]["forwardAuth"]["address"] == (
        f"{settings.ENDPOINT_AUTH_URL}{endpoint.pk}/"
    )
    wait_for(
        lambda: traefik.route_conditions(kube_api_client, team.namespace, f"wl-{endpoint.pk}").get(
            "Accepted"
        )
        == "True",
        timeout=60,
    )
    # The team's namespace as the portal keeps it with endpoints on the Gateway: drift repair
    # adds the route for the ids that name no endpoint.
    repaired = services.drift_repair_pass(cluster=real_cluster)
    assert "HTTPRoute" in {a.kind for a in repaired.repaired}, repaired
    other_endpoint = _deploy(api, lead, team, l4, catalog["serving"], name="charlm-b")
    other_keys = api(lead).post(
        f"/api/v1/workloads/{other_endpoint.pk}/keys/", {"name": "b"}, "json"
    )
    assert other_keys.status_code == 201, other_keys.json()
    other_key = other_keys.json()["key"]

    route = Route(gateway.url, endpoint_host, team.namespace, endpoint.pk)
    try:
        wait_for(lambda: complete(route, key, "x", max_tokens=1).status_code == 200, timeout=60)
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
        # Another endpoint's key opens that endpoint, not this one.
        assert complete(route, other_key, "The platform").status_code == 401
        # An id that names no endpoint is answered as a wrong key is (the team's route for
        # them asks the portal), not with the gateway's 404: nobody learns which ids exist.
        unknown = Route(gateway.url, endpoint_host, team.namespace, endpoint.pk + 1000)
        try:
            wait_for(lambda: unknown.call("GET", "v1/models").status_code != 404, timeout=60)
            nobody = complete(unknown, key, "The platform")
            wrong = complete(route, f"{key[:-4]}zzzz", "The platform")
            assert nobody.status_code == wrong.status_code == 401
            assert nobody.text == wrong.text
            assert nobody.headers["WWW-Authenticate"] == wrong.headers["WWW-Authenticate"]
        finally:
            unknown.close()

        # A streamed completion passes through as it is made: the first characters arrive
        # long before the last is generated (nothing buffers the whole answer on the way).
        arrivals: list[float] = []
        pieces: list[str] = []
        started = time.monotonic()
        with route.http.stream(
            "POST",
            f"{route.base}v1/completions",
            headers={"Authorization": f"Bearer {key}"},
            json={"prompt": "The platform", "max_tokens": 60, "temperature": 0, "stream": True},
        ) as streamed:
            assert streamed.status_code == 200
            assert streamed.headers["content-type"].startswith("text/event-stream")
            for line in streamed.iter_lines():
                if line.startswith("data: {"):
                    arrivals.append(time.monotonic() - started)
                    pieces.append(json_text(line))
        assert (
            "".join(pieces) == complete(route, key, "The platform", 60).json()["choices"][0]["text"]
        )
        generating = 59 * TOKEN_DELAY
        assert arrivals[-1] - arrivals[0] >= 0.8 * generating, arrivals
        assert arrivals[0] < arrivals[-1] - 0.5 * generating, arrivals

        # The scaling loop reads the endpoint's calls from the gateway's own metrics with its
        # default queries (Traefik's, per backend Service), as Prometheus scrapes them.
        with prom.running(
            tmp_path / "prometheus",
            [metrics_target(gateway)],
            scrape_interval="1s",
            kubernetes_labels=False,
        ) as server:
            client = PrometheusClient(server.url)

            def measured() -> Any:
                complete(route, key, "x", max_tokens=1)
                reading = prometheus_reading(client, endpoint)
                return reading if reading.requests_per_second else None

            reading = wait_for(measured, timeout=60, every=0.5)
            assert reading.requests_per_second > 0
            assert reading.latency_p95_seconds is not None
            assert 0 < reading.latency_p95_seconds < 5

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

        # Revoked, the key stops within the portal's remembering time.
        (made,) = api(lead).get(f"/api/v1/workloads/{endpoint.pk}/keys/").json()
        revoked = api(lead).delete(f"/api/v1/workloads/{endpoint.pk}/keys/{made['id']}/")
        assert revoked.status_code == 204, revoked.content
        wait_for(
            lambda: complete(route, key, "x", max_tokens=1).status_code == 401,
            timeout=settings.GATEWAY_AUTH_CACHE_SECONDS + 5,
        )

        rate_limiter().reset()  # the wrong keys above counted too
        # Guessing from one address, spread over two endpoints (neither reaches its own
        # count): the address is answered 429 after GUESSES wrong keys, whatever address it
        # then writes in X-Forwarded-For (Traefik replaces the header with what it saw).
        other_route = Route(gateway.url, endpoint_host, team.namespace, other_endpoint.pk)
        try:
            for number in range(GUESSES):
                target = route if number % 2 else other_route
                guessed = complete(target, f"{key[:-6]}{number:06d}", "x", max_tokens=1)
                assert guessed.status_code == 401, (number, guessed.text)
            throttled = complete(route, f"{key[:-6]}zzzzzz", "x", max_tokens=1)
            assert throttled.status_code == 429, throttled.text
            assert int(throttled.headers["Retry-After"]) > 0
            disguised = route.call(
                "POST",
                "v1/completions",
                key=f"{key[:-6]}yyyyyy",
                json={"prompt": "x", "max_tokens": 1},
                headers={"X-Forwarded-For": "203.0.113.9"},
            )
            assert disguised.status_code == 429, disguised.text
        finally:
            other_route.close()
    finally:
        route.close()
