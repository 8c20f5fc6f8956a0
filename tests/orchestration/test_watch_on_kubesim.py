"""Status from watch streams, against the real API server of deploy/kubesim.

The watch loop's database work runs in the test's thread (``ClusterWatch.step``); the
informers follow the cluster in threads of their own, as in the ``watch_clusters`` process.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients, kube_for
from apps.orchestration.informer import ReconnectBackoff
from apps.orchestration.kube import Kube, WatchExpired
from apps.orchestration.models import WorkloadLogArchive
from apps.orchestration.watch import ClusterWatch
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]

FAST = ReconnectBackoff(base_seconds=0.1, max_seconds=0.5)


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def team(cluster: Cluster, kube_api_client: Any) -> Iterator[Team]:
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    with contextlib.suppress(ApiException):
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)


H100_NODES = [f"h100-{i}" for i in range(4)]


def quietest_h100(team: Team) -> str:
    """The H100 node with the fewest live pods: tests before this one (in this process's
    cluster) may still hold GPUs of the first node while their namespaces go."""
    kube = kube_for(Cluster.objects.get(name="sim"))
    busy = dict.fromkeys(H100_NODES, 0)
    for pod in kube.list_owned("v1", "Pod", label_selector=m.LABEL_WORKLOAD):
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if node in busy and phase in ("Pending", "Running"):
            busy[node] += 1
    return min(H100_NODES, key=lambda n: (busy[n], n))


def started(team: Team, run: str = "60s") -> Workload:
    """A workload whose objects exist (reconciled), so its state is STARTING."""
    workload = WorkloadFactory(
        team=team,
        owner=UserFactory(),
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        placement={"replicas": [{"node": quietest_h100(team)}]},
        params={"pod_annotations": {"kubesim.io/run-duration": run}},
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    workload.refresh_from_db()
    assert workload.state == wl.STARTING
    return workload


def step_until(watch: ClusterWatch, workload: Workload, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watch.step(timeout=0.5)
        workload.refresh_from_db()
        if workload.state == state:
            return
    raise AssertionError(f"workload {workload.pk} is {workload.state}, not {state}")


@contextlib.contextmanager
def watching(watch: ClusterWatch) -> Iterator[ClusterWatch]:
    watch.start()
    try:
        assert watch.wait_synced(60)
        yield watch
    finally:
        watch.stop()


def test_pod_and_job_changes_reach_the_workload_through_the_watch(
    cluster: Cluster, team: Team
) -> None:
    with watching(ClusterWatch(cluster, backoff=FAST)) as watch:
        workload = started(team, run="3s")
        step_until(watch, workload, wl.RUNNING)
        assert workload.started_at is not None
        # The Job's completion arrives through the Job watch too.
        step_until(watch, workload, wl.SUCCEEDED)
        stats = watch.stats()
        # One list each at the start; everything after came as watch events.
        assert stats["Pod"].lists == 1 and stats["Job"].lists == 1
        assert stats["Pod"].events >= 2 and stats["Job"].events >= 1
        # The GPU nodes were read once into the inventory.
        assert cluster.nodes.count() == 9


@pytest.mark.django_db(transaction=True)  # the cleanup workers read with connections of their own
def test_an_ended_workloads_objects_are_archived_and_deleted_by_the_cleanup_workers(
    cluster: Cluster, team: Team
) -> None:
    with watching(ClusterWatch(cluster, backoff=FAST)) as watch:
        workload = started(team, run="2s")
        job = workload.k8s_objects[0]
        step_until(watch, workload, wl.SUCCEEDED)
        assert watch.wait_cleaned(60)
        workload.refresh_from_db()
        assert workload.k8s_objects == []
        assert watch.kube.get("batch/v1", "Job", job["name"], team.namespace) is None
        assert WorkloadLogArchive.objects.filter(workload=workload).exists()
        # The state moved once: the cleanup changed no state and told no one again.
        assert list(workload.events.values_list("to_state", flat=True)).count(wl.SUCCEEDED) == 1


def test_a_status_update_changes_every_state_before_it_hands_out_the_cleanup(
    cluster: Cluster, team: Team
) -> None:
    kube = kube_for(cluster)
    ended = [started(team, run="1s"), started(team, run="1s")]
    ids = [w.pk for w in ended]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        jobs = [
            job
            for pk in ids
            for job in kube.list_owned("batch/v1", "Job", label_selector=f"{m.LABEL_WORKLOAD}={pk}")
        ]
        complete = [
            j
            for j in jobs
            if any(
                c.get("type") == "Complete" and c.get("status") == "True"
                for c in (j.get("status") or {}).get("conditions") or []
            )
        ]
        if len(complete) == 2:
            break
        time.sleep(0.5)
    handed: list[list[int]] = []

    def clean_up(workload_ids: list[int]) -> None:
        # Both ended workloads are handed over at once, their states already changed, and
        # their objects still there: the cleanup comes after, not in between.
        states = set(Workload.objects.filter(pk__in=workload_ids).values_list("state", flat=True))
        assert states == {wl.SUCCEEDED}
        for pk in workload_ids:
            assert kube.list_owned("batch/v1", "Job", label_selector=f"{m.LABEL_WORKLOAD}={pk}")
        handed.append(sorted(workload_ids))

    synced = services.status_sync_observed(
        cluster=cluster,
        pods=kube.list_owned("v1", "Pod", label_selector=m.LABEL_WORKLOAD),
        jobs=kube.list_owned("batch/v1", "Job", label_selector=m.LABEL_WORKLOAD),
        workload_ids=ids,
        clean_up=clean_up,
    )
    assert handed == [sorted(ids)] and synced.freed == 2
    # Without a hand-over the status update cleans up itself, several at once.
    assert services.gone_clean_up(ids) == 2
    for workload in ended:
        workload.refresh_from_db()
        assert workload.k8s_objects == []
        # (other tests' Jobs may share this cluster: only these two must be gone)
        assert (
            kube.list_owned("batch/v1", "Job", label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}")
            == []
        )


def churn_until_expired(kube: Kube, namespace: str, resource_version: str) -> int:
    """Pod events until the API server no longer keeps ``resource_version`` (its watch cache
    drops events once full and older than 75 s, as etcd compaction does): returns how many."""
    core = k8s.CoreV1Api(kube.api_client)
    filler = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "filler"},
        # Never scheduled: only its object changes.
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "busybox"}]},
    }
    core.create_namespaced_pod(namespace, filler)
    deadline = time.monotonic() + 300
    patches = 0
    while time.monotonic() < deadline:
        for _ in range(50):
            patches += 1
            core.patch_namespaced_pod(
                "filler", namespace, {"metadata": {"labels": {"n": str(patches)}}}
            )
        try:
            for _ in kube.watch_collection(
                "v1", "Pod", resource_version=resource_version, timeout_seconds=1
            ):
                pass
        except WatchExpired:
            return patches
    raise AssertionError(f"resourceVersion {resource_version} still served after {patches} changes")


def test_gone_resource_version_lists_again_and_catches_up(
    cluster: Cluster, team: Team, k8s_namespace: str, kube_api_client: Any
) -> None:
    # The churn is the test's own doing (pods the portal never creates): the admin's client.
    kube = Kube(kube_api_client)
    _, old_version = kube.list_collection("v1", "Pod", label_selector=m.LABEL_WORKLOAD)
    workload = started(team, run="600s")
    # A copy from before the workload's pod existed, with a pod that has long gone; by the
    # time the watch starts the API server no longer keeps that version: 410 Gone.
    ghost = {
        "metadata": {
            "name": "ghost",
            "namespace": team.namespace,
            "resourceVersion": old_version,
            "labels": {m.LABEL_WORKLOAD: "999999"},
        },
        "status": {"phase": "Running"},
    }
    assert churn_until_expired(kube, k8s_namespace, old_version) > 0
    watch = ClusterWatch(cluster, backoff=FAST, nodes=False)
    watch.pods.seed([ghost], resource_version=old_version)
    with watching(watch):
        step_until(watch, workload, wl.RUNNING)
    stats = watch.pods.stats
    assert stats.relists == 1 and stats.lists == 1  # the list after the 410, nothing more
    names = {p["metadata"]["name"] for p in watch.pods.objects()}
    assert "ghost" not in names
    owners = {p["metadata"]["labels"][m.LABEL_WORKLOAD] for p in watch.pods.objects()}
    assert str(workload.pk) in owners
    assert int(watch.pods.resource_version) > int(old_version)


class Proxy:
    """A TCP forwarder in front of the API server whose connections the test can cut."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.refusing = threading.Event()
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing.is_set():
                conn.close()
                continue
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.connections += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every open connection (as a restarting API server or a network blip does)."""
        with self.lock:
            connections, self.connections = self.connections, []
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        self.listener.close()
        self.cut()


@pytest.mark.skipif(
    os.environ.get("KUBESIM_IDENTITY") == "chart",
    reason="the watch here goes through a TCP proxy on the admin's own connection; the chart's "
    "identity is not what it checks (it runs in the main pass)",
)
def test_watch_reconnects_with_backoff_after_the_connection_drops(
    cluster: Cluster, team: Team, kubesim: Kubesim
) -> None:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(
        config_file=str(kubesim.kubeconfig), client_configuration=configuration
    )
    host, port = configuration.host.removeprefix("https://").rsplit(":", 1)
    proxy = Proxy((host, int(port)))
    configuration.host = f"https://{host}:{proxy.port}"
    configuration.retries = 0
    kube = Kube(k8s.ApiClient(configuration))
    watch = ClusterWatch(cluster, kube=kube, backoff=FAST, nodes=False)
    try:
        with watching(watch):
            # The API server goes away for a moment: open streams break, new ones fail.
            proxy.refusing.set()
            proxy.cut()
            deadline = time.monotonic() + 30
            while watch.pods.stats.reconnects < 2:  # at least one failed attempt to connect
                assert time.monotonic() < deadline, watch.pods.stats
                time.sleep(0.1)
            proxy.refusing.clear()
            # A change made while the watch is back follows through; the copy was not
            # listed again (the watch went on from the version it had).
            workload = started(team)
            step_until(watch, workload, wl.RUNNING)
            stats = watch.pods.stats
            assert stats.lists == 1 and stats.watches >= 2
    finally:
        proxy.close()
