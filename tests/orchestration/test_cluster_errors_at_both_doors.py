"""A cluster error gets the same answer in the portal and in the API: a cluster at a dead
address (unreachable), and the simulated cluster refusing a request (deploy/kubesim)."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils.html import escape
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from rest_framework.test import APIClient

from apps.accounts.models import Team, User
from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.orchestration.errors import UNREACHABLE_MESSAGE
from apps.workloads import core
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, WorkloadFactory
from tests.plugins.cast import Cast
from tests.plugins.redis_server import free_port

pytestmark = pytest.mark.django_db


def api_client(user: User) -> APIClient:
    _, plaintext = api_token_create(actor=user, name="read", scopes=["read"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def portal_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def sse_events(response: Any) -> list[tuple[str, str]]:
    text = b"".join(response.streaming_content).decode()
    events = []
    for block in text.strip().split("\n\n"):
        event, data = block.split("\n")
        events.append((event.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


def register_cluster(tmp_path: Path, port: int) -> Cluster:
    """A registered cluster whose API server is at ``port`` on loopback."""
    kubeconfig = tmp_path / "dead.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "dead",
                        "cluster": {
                            "server": f"https://127.0.0.1:{port}",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
                "current-context": "dead",
            }
        )
    )
    forget_clients()
    return Cluster.objects.create(name="dead", kubeconfig_path=str(kubeconfig))


@pytest.fixture
def dead_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """A registered cluster whose API server address answers nothing (a free local port)."""
    # The adapter retries with backoff before it says "unreachable"; no need to wait here.
    monkeypatch.setattr("apps.orchestration.kube.time.sleep", lambda seconds: None)
    return register_cluster(tmp_path, free_port())


@pytest.fixture(params=["closed port", "accepts and never answers"])
def down_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """A registered cluster whose API server is down: nothing listens at its port, or something
    accepts connections there and never says a word (a hung API server, a black-holed VIP)."""
    if request.param == "closed port":
        yield register_cluster(tmp_path, free_port())
        return
    silent = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield register_cluster(tmp_path, silent.getsockname()[1])
    finally:
        silent.close()


def placed(cast: Cast, cluster: Cluster, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "state": core.RUNNING,
        "cluster": cluster,
    }
    values.update(kw)
    workload: Workload = WorkloadFactory(**values)
    return workload


def test_an_unreachable_cluster_gets_the_same_answer_in_the_portal_and_the_api(
    cast: Cast, dead_cluster: Cluster
) -> None:
    workload = placed(
        cast,
        dead_cluster,
        k8s_objects=[{"kind": "Job", "namespace": cast.team.namespace, "name": "wl-x"}],
    )
    api, portal = api_client(cast.owner), portal_client(cast.owner)

    logs = api.get(f"/api/v1/workloads/{workload.pk}/logs/?tail=10")
    assert logs.status_code == 503
    assert logs.json() == {
        "code": "cluster_unreachable",
        "message": UNREACHABLE_MESSAGE,
        "fields": {},
    }
    events = api.get(f"/api/v1/workloads/{workload.pk}/events/")
    assert events.status_code == 200
    assert events.json()["cluster_events_unavailable"] == UNREACHABLE_MESSAGE

    # The portal's partials answer 200 (so htmx shows them) with the same words.
    for partial in ("logs", "events"):
        page = portal.get(f"/workloads/{workload.pk}/{partial}/")
        assert page.status_code == 200, partial
        assert escape(UNREACHABLE_MESSAGE) in page.content.decode(), partial
    stream = portal.get(f"/workloads/{workload.pk}/logs/stream/")
    assert sse_events(stream) == [("unavailable", UNREACHABLE_MESSAGE)]


def test_a_cluster_that_is_down_is_named_as_such_within_2_s_in_the_portal_and_the_api(
    cast: Cast, down_cluster: Cluster, settings: Any
) -> None:
    """Real time, no retries skipped: before, a closed port cost each cluster call the adapter's
    five tries (1.5 to 3 s, and a page makes several), and an API server that accepts and never
    answers kept the page waiting for ever (the client had no timeout)."""
    settings.NOTEBOOK_HOST = "notebooks.example.com"
    workload = placed(
        cast,
        down_cluster,
        k8s_objects=[{"kind": "Job", "namespace": cast.team.namespace, "name": "wl-x"}],
    )
    notebook = placed(
        cast,
        down_cluster,
        kind=core.KIND_NOTEBOOK,
        priority_class="development",
        k8s_objects=[{"kind": "Secret", "namespace": cast.team.namespace, "name": "wl-x-token"}],
    )
    api, portal = api_client(cast.owner), portal_client(cast.owner)
    api.get("/api/v1/")  # the first request imports the URL configuration: not timed
    words = "The cluster cannot be reached"
    timed: dict[str, float] = {}

    def timing(name: str, call: Any) -> Any:
        start = time.monotonic()
        response = call()
        timed[name] = time.monotonic() - start
        return response

    logs = timing("api logs", lambda: api.get(f"/api/v1/workloads/{workload.pk}/logs/?tail=10"))
    assert logs.status_code == 503
    assert logs.json()["code"] == "cluster_unreachable"
    assert words in logs.json()["message"]
    events = timing("api events", lambda: api.get(f"/api/v1/workloads/{workload.pk}/events/"))
    assert events.status_code == 200
    assert words in events.json()["cluster_events_unavailable"]
    for partial in ("logs", "events"):
        page = timing(partial, lambda: portal.get(f"/workloads/{workload.pk}/{partial}/"))  # noqa: B023
        assert page.status_code == 200, partial
        assert words in page.content.decode(), partial
    opened = timing("open", lambda: portal.get(f"/workloads/{notebook.pk}/open/"))
    assert opened.status_code == 503
    assert words in opened.content.decode()
    # The followed log: its reader runs after the view has returned, yet within the same time.
    stream = timing(
        "stream",
        lambda: sse_events(portal.get(f"/workloads/{workload.pk}/logs/stream/?follow=1")),
    )
    assert [name for name, _ in stream] == ["unavailable"], stream
    assert words in stream[0][1]
    assert all(seconds < 2.0 for seconds in timed.values()), timed


def test_opening_a_notebook_on_an_unreachable_cluster_is_a_503_with_the_same_words(
    cast: Cast, dead_cluster: Cluster, settings: Any
) -> None:
    settings.NOTEBOOK_HOST = "notebooks.example.com"
    workload = placed(
        cast,
        dead_cluster,
        kind=core.KIND_NOTEBOOK,
        priority_class="development",
        k8s_objects=[{"kind": "Secret", "namespace": cast.team.namespace, "name": "wl-x-token"}],
    )
    page = portal_client(cast.owner).get(f"/workloads/{workload.pk}/open/")
    assert page.status_code == 503
    assert escape(UNREACHABLE_MESSAGE) in page.content.decode()
    assert page["Cache-Control"] == "no-store"


# --- the simulated cluster refuses ------------------------------------------------------------


@dataclass
class Sim:
    cluster: Cluster
    team: Team


@pytest.fixture
def sim(kubesim: Kubesim, kube_api_client: Any, cast: Cast) -> Iterator[Sim]:
    """The simulated cluster, and a team of the cast's owner with a fresh namespace."""
    forget_clients()
    cluster = Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))
    team = TeamFactory()
    MembershipFactory(user=cast.owner, team=team)
    TeamQuotaFactory(team=team, gpu_class=cast.gpu_class, limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield Sim(cluster, team)
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture
def ghost_node(kube_api_client: Any) -> Iterator[str]:
    """A node the API server proxies to the simulated kubelet, which never runs its pods: their
    containers stay waiting to start, and the kubelet refuses their logs (400)."""
    core_api = k8s.CoreV1Api(kube_api_client)
    real = core_api.read_node("h100-0").status
    name = f"ghost-{uuid.uuid4().hex[:8]}"
    port = real.daemon_endpoints.kubelet_endpoint.port
    status = {
        "addresses": [{"type": a.type, "address": a.address} for a in real.addresses],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }
    core_api.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    core_api.patch_node_status(name, {"status": status})
    yield name
    core_api.delete_node(name)


def waiting_pod(team: Team, workload: Workload, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"wl-{workload.pk}-ghost",
            "namespace": team.namespace,
            "labels": {m.LABEL_MANAGED_BY: m.MANAGED_BY, m.LABEL_WORKLOAD: str(workload.pk)},
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def test_a_refused_request_gets_the_same_answer_in_the_portal_and_the_api(
    cast: Cast, sim: Sim, ghost_node: str, kube_api_client: Any
) -> None:
    workload = placed(cast, sim.cluster, team=sim.team)
    pod = waiting_pod(sim.team, workload, ghost_node)
    k8s.CoreV1Api(kube_api_client).create_namespaced_pod(sim.team.namespace, pod)
    name = pod["metadata"]["name"]

    logs = api_client(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/?tail=10")
    assert logs.status_code == 409
    body = logs.json()
    assert body["code"] == "cluster_refused"
    message = body["message"]
    # The API server's own words, after ours.
    assert message == f'The cluster refused: container "main" in pod "{name}" is waiting to start'

    portal = portal_client(cast.owner)
    page = portal.get(f"/workloads/{workload.pk}/logs/")
    assert page.status_code == 200
    assert escape(message) in page.content.decode()
    stream = portal.get(f"/workloads/{workload.pk}/logs/stream/")
    assert sse_events(stream) == [("unavailable", message)]


def test_a_record_the_api_server_rejects_fails_that_workload_with_its_words(
    cast: Cast, sim: Sim
) -> None:
    """DESIGN.md: it fails that workload with the server's message; it never blocks others."""
    rejected = placed(
        cast,
        sim.cluster,
        team=sim.team,
        state=core.ADMITTED,
        placement={"replicas": [{"node": "h100-0"}]},
        env={"A=B": "1"},  # no valid environment variable name contains "="
    )
    fine = placed(
        cast,
        sim.cluster,
        team=sim.team,
        state=core.ADMITTED,
        placement={"replicas": [{"node": "h100-0"}]},
        params={"pod_annotations": {"kubesim.io/run-duration": "10m"}},
    )
    result = services.reconcile_pass(cluster=sim.cluster)
    rejected.refresh_from_db()
    fine.refresh_from_db()
    assert rejected.state == core.FAILED
    assert rejected.last_reason.startswith(f'cannot be started: Job.batch "wl-{rejected.pk}"')
    assert '"A=B"' in rejected.last_reason
    assert fine.state == core.STARTING
    assert result.created == 1
    assert result.unreachable == []
