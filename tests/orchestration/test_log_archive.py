"""Logs and events outlive the objects: archived before the delete, per replica and attempt,
capped, kept for a set time, and served by the portal and the API after the objects are gone.

A stand-in adapter plays the cluster here (its pods, their logs, its events, and the order of
reads and deletes); tests/orchestration/test_log_archive_on_kubesim.py and
tests/api/test_log_archive_on_kubesim.py do the same against the simulated cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster
from apps.common import taskqueue
from apps.orchestration import archive, cluster_reads, clusters, services
from apps.orchestration import manifests as m
from apps.orchestration.errors import ClusterRefused, ClusterUnreachable
from apps.orchestration.models import WorkloadArchive, WorkloadLogArchive
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def pod(workload: Workload, name: str, *, replica: int | None = None, **extra: Any) -> Any:
    labels = {m.LABEL_WORKLOAD: str(workload.pk), m.LABEL_MANAGED_BY: m.MANAGED_BY}
    annotations = {} if replica is None else {archive.ANNOTATION_COMPLETION_INDEX: str(replica)}
    meta = {
        "name": name,
        "uid": f"uid-{name}",
        "labels": labels,
        "annotations": annotations,
        "creationTimestamp": extra.pop("created", "2025-01-01T12:00:00Z"),
        **extra.pop("meta", {}),
    }
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "main"}]},
        "status": extra.pop("status", {"phase": "Failed"}),
    }


class FakeKube:
    """The cluster of one team namespace: pods with logs, events, and a Job to delete."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.logs: dict[str, list[str] | Exception] = {}
        self.events: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def list_objects(self, api_version: str, kind: str, **_: Any) -> list[dict[str, Any]]:
        self.calls.append(f"list {kind}")
        return {"Pod": self.pods, "Event": self.events}.get(kind, [])

    def list_owned(self, api_version: str, kind: str, **kw: Any) -> list[dict[str, Any]]:
        return self.list_objects(api_version, kind, **kw)

    def pod_log(
        self, name: str, namespace: str, *, container: str, tail_lines: int, follow: bool
    ) -> Iterator[str]:
        self.calls.append(f"log {name}")
        value = self.logs.get(name, [])
        if isinstance(value, Exception):
            raise value
        yield from value[-tail_lines:]

    def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None, **_: Any
    ) -> bool:
        self.calls.append(f"delete {kind} {name}")
        self.pods = []  # the Job takes its pods with it
        return True


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    monkeypatch.setattr(clusters, "kube_for", lambda cluster: fake)
    monkeypatch.setattr(cluster_reads, "_kube", lambda cluster: fake)
    return fake


@pytest.fixture
def cluster(db: None) -> Cluster:
    return Cluster.objects.create(name="c1", kubeconfig_path="/nowhere")


def job(cast: Cast, cluster: Cluster, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "state": core.FAILED,
        "cluster": cluster,
        "finished_at": timezone.now(),
    }
    values.update(kw)
    workload: Workload = WorkloadFactory(**values)
    workload.k8s_objects = [
        {"kind": "Job", "namespace": cast.team.namespace, "name": f"wl-{workload.pk}"}
    ]
    workload.save(update_fields=["k8s_objects"])
    return workload


def k8s_event(name: str, reason: str, message: str, count: int = 1) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": "Pod", "name": name},
        "type": "Warning" if reason == "BackOff" else "Normal",
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": "2025-01-01T12:00:05Z",
    }


def api_client(user: User) -> APIClient:
    _, plaintext = api_token_create(actor=user, name="read", scopes=["read"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def portal_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def text(response: Any) -> str:
    return b"".join(response.streaming_content).decode()


# --- archive before delete ----------------------------------------------------------------


def test_logs_and_events_are_archived_before_the_objects_are_deleted(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    workload = job(cast, cluster)
    kube.pods = [pod(workload, "wl-pod-a")]
    kube.logs["wl-pod-a"] = ["12:00:01 loading data", "12:00:02 Traceback: boom"]
    kube.events = [
        k8s_event("wl-pod-a", "Scheduled", "assigned to h100-0"),
        k8s_event("someone-else", "Scheduled", "not ours"),
    ]

    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"

    first_delete = next(i for i, c in enumerate(kube.calls) if c.startswith("delete"))
    assert "log wl-pod-a" in kube.calls[:first_delete]
    row = WorkloadLogArchive.objects.get(workload=workload)
    assert (row.replica, row.attempt, row.pod_name, row.container) == (0, 1, "wl-pod-a", "main")
    assert row.text == "12:00:01 loading data\n12:00:02 Traceback: boom\n"
    assert (row.bytes, row.truncated) == (len(row.text), False)
    events = WorkloadArchive.objects.get(workload=workload).events
    assert [(e["object"], e["reason"]) for e in events] == [("Pod/wl-pod-a", "Scheduled")]
    workload.refresh_from_db()
    assert workload.k8s_objects == []


def test_a_second_pass_updates_the_archive_without_adding_rows(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    workload = job(cast, cluster)
    kube.pods = [pod(workload, "wl-pod-a")]
    kube.logs["wl-pod-a"] = ["one"]
    kube.events = [k8s_event("wl-pod-a", "BackOff", "restarting", count=1)]
    services.workload_archive(workload=workload, kube=kube)  # type: ignore[arg-type]
    kube.logs["wl-pod-a"] = ["one", "two"]
    kube.events = [k8s_event("wl-pod-a", "BackOff", "restarting", count=3)]
    services.workload_archive(workload=workload, kube=kube)  # type: ignore[arg-type]

    row = WorkloadLogArchive.objects.get(workload=workload)
    assert (row.attempt, row.text) == (1, "one\ntwo\n")
    events = WorkloadArchive.objects.get(workload=workload).events
    assert [(e["reason"], e["count"]) for e in events] == [("BackOff", 3)]


def test_a_container_that_never_started_is_archived_with_the_clusters_reason(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    workload = job(cast, cluster)
    kube.pods = [pod(workload, "wl-pod-a")]
    kube.logs["wl-pod-a"] = ClusterRefused(
        'container "main" in pod "wl-pod-a" is waiting to start: ImagePullBackOff', status=400
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    row = WorkloadLogArchive.objects.get(workload=workload)
    assert row.text == ""
    assert "waiting to start: ImagePullBackOff" in row.note
    body = text(api_client(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/"))
    assert body.startswith("[gpupaas] no log: container")


def test_logs_the_cluster_cannot_give_hold_the_delete_then_it_goes_with_a_note(
    cast: Cast, cluster: Cluster, kube: FakeKube, settings: Any
) -> None:
    settings.LOG_ARCHIVE_RETRY_SECONDS = 300
    workload = job(cast, cluster)
    kube.pods = [pod(workload, "wl-pod-a")]
    kube.logs["wl-pod-a"] = ClusterUnreachable("logs of team/wl-pod-a: 502 Bad Gateway")

    assert services.workload_reconcile(workload_id=workload.pk) == "archiving"
    assert not [c for c in kube.calls if c.startswith("delete")]
    waiting = WorkloadArchive.objects.get(workload=workload)
    assert waiting.failing_since is not None
    # The reconcile pass leaves its objects alone too (no orphan sweep behind its back).
    result = services.reconcile_pass(cluster=cluster)
    assert (result.deleted, result.orphans_deleted) == (0, 0)
    assert not [c for c in kube.calls if c.startswith("delete")]

    # Past the bounded wait: the objects go, and the archive says why the logs are missing.
    WorkloadArchive.objects.filter(pk=waiting.pk).update(
        failing_since=timezone.now() - timedelta(seconds=301)
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    gave_up = WorkloadArchive.objects.get(workload=workload)
    note = gave_up.note
    assert note == "logs could not be archived: wl-pod-a: logs of team/wl-pod-a: 502 Bad Gateway"
    assert gave_up.failing_since is None  # nothing waits any more; the purge may take it
    response = api_client(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/")
    assert response.status_code == 409
    assert response.json()["message"] == f"No logs were kept: {note}."
    # A later pass (nothing left to read) keeps the note.
    services.workload_reconcile(workload_id=workload.pk)
    assert WorkloadArchive.objects.get(workload=workload).note == note


def test_an_unreachable_cluster_is_retried_without_losing_the_wait_clock(
    cast: Cast, cluster: Cluster, kube: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = job(cast, cluster)

    def down(*args: Any, **kw: Any) -> list[dict[str, Any]]:
        raise ClusterUnreachable("list Pod: connection refused")

    monkeypatch.setattr(kube, "list_objects", down)
    with pytest.raises(ClusterUnreachable):
        services.workload_reconcile(workload_id=workload.pk)
    assert WorkloadArchive.objects.get(workload=workload).failing_since is not None
    workload.refresh_from_db()
    assert workload.k8s_objects  # nothing deleted, nothing forgotten


def test_each_pod_of_a_replica_is_its_own_attempt(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    """A pod lost while the workload lives on (evicted, node gone) is archived by the status
    sync before the next pod replaces it; the next pod is the replica's attempt 2."""
    workload = job(cast, cluster, state=core.RUNNING, finished_at=None)
    lost = pod(
        workload,
        "wl-pod-a",
        meta={"deletionTimestamp": "2025-01-01T12:05:00Z"},
        status={"phase": "Running"},
    )
    kube.pods = [lost]
    kube.logs["wl-pod-a"] = ["first attempt: step 1", "first attempt: step 2"]
    services.status_sync_pass(cluster=cluster)
    assert WorkloadLogArchive.objects.get(workload=workload).attempt == 1

    kube.pods = [
        pod(workload, "wl-pod-b", created="2025-01-01T12:06:00Z", status={"phase": "Running"})
    ]
    kube.logs["wl-pod-b"] = ["second attempt: step 1"]
    services.status_sync_pass(cluster=cluster)  # nothing lost: nothing archived meanwhile
    assert WorkloadLogArchive.objects.filter(workload=workload).count() == 1

    Workload.objects.filter(pk=workload.pk).update(state=core.CANCELLED)
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    rows = list(WorkloadLogArchive.objects.filter(workload=workload).order_by("attempt"))
    assert [(r.replica, r.attempt, r.pod_name) for r in rows] == [
        (0, 1, "wl-pod-a"),
        (0, 2, "wl-pod-b"),
    ]

    client = api_client(cast.owner)
    latest = text(client.get(f"/api/v1/workloads/{workload.pk}/logs/"))
    assert latest == "second attempt: step 1\n"
    earlier = text(client.get(f"/api/v1/workloads/{workload.pk}/logs/?attempt=1&tail=1"))
    assert earlier == "first attempt: step 2\n"
    missing = client.get(f"/api/v1/workloads/{workload.pk}/logs/?attempt=5")
    assert missing.status_code == 409
    assert missing.json()["message"] == "Replica 0 has no archived attempt 5; kept: 1, 2."


def test_a_lost_pod_whose_log_cannot_be_read_is_asked_once_per_pod(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    """A pod on a node that stopped answering: the status sync (every few seconds) does not
    wait on its log again and again; the archive before the delete tries once more."""
    workload = job(cast, cluster, state=core.RUNNING, finished_at=None)
    kube.pods = [
        pod(
            workload,
            "wl-pod-a",
            meta={"deletionTimestamp": "2025-01-01T12:05:00Z"},
            status={"phase": "Running"},
        )
    ]
    kube.logs["wl-pod-a"] = ClusterUnreachable("logs of team/wl-pod-a: 502 node unreachable")
    services.status_sync_pass(cluster=cluster)
    services.status_sync_pass(cluster=cluster)
    assert kube.calls.count("log wl-pod-a") == 1
    row = WorkloadLogArchive.objects.get(workload=workload)
    assert (row.text, row.note) == (
        "",
        "log unavailable: logs of team/wl-pod-a: 502 node unreachable",
    )

    kube.logs["wl-pod-a"] = ["it answered after all"]
    Workload.objects.filter(pk=workload.pk).update(state=core.CANCELLED)
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    row.refresh_from_db()
    assert (row.attempt, row.text, row.note) == (1, "it answered after all\n", "")


def test_a_preempted_workloads_pods_are_archived_before_its_objects_go(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    workload = job(cast, cluster, state=core.RUNNING, finished_at=None)
    preempted = pod(
        workload,
        "wl-pod-a",
        status={
            "phase": "Running",
            "conditions": [
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
            ],
        },
    )
    kube.pods = [preempted]
    kube.logs["wl-pod-a"] = ["epoch 3 checkpoint saved"]
    services.status_sync_pass(cluster=cluster)
    workload.refresh_from_db()
    assert workload.state == core.PREEMPTED
    assert workload.k8s_objects == []
    row = WorkloadLogArchive.objects.get(workload=workload)
    assert (row.attempt, row.text) == (1, "epoch 3 checkpoint saved\n")


# --- cap and retention --------------------------------------------------------------------


def test_a_long_log_keeps_its_end_and_says_so(
    cast: Cast, cluster: Cluster, kube: FakeKube, settings: Any
) -> None:
    settings.LOG_ARCHIVE_MAX_BYTES_PER_REPLICA = 1024
    workload = job(cast, cluster)
    kube.pods = [pod(workload, "wl-pod-a")]
    kube.logs["wl-pod-a"] = [f"2025-01-01T12:00:00Z step {i:04d} " + "." * 30 for i in range(500)]
    services.workload_reconcile(workload_id=workload.pk)

    row = WorkloadLogArchive.objects.get(workload=workload)
    assert row.truncated
    assert row.bytes <= 1024
    assert row.text.splitlines()[-1].startswith("2025-01-01T12:00:00Z step 0499")
    client = api_client(cast.owner)
    shown = text(client.get(f"/api/v1/workloads/{workload.pk}/logs/?tail=10000")).splitlines()
    assert shown[0] == archive.truncation_notice(row.bytes)
    assert shown[-1].startswith("2025-01-01T12:00:00Z step 0499")
    # A short tail shows only the end, with no notice in the middle of nowhere.
    assert text(client.get(f"/api/v1/workloads/{workload.pk}/logs/?tail=2")).count("\n") == 2


def test_the_retention_purge_removes_only_archives_older_than_the_setting(
    cast: Cast, cluster: Cluster, settings: Any
) -> None:
    settings.LOG_ARCHIVE_RETENTION_DAYS = 30
    old, recent = job(cast, cluster), job(cast, cluster)
    now = timezone.now()
    for workload, age in ((old, 31), (recent, 29)):
        WorkloadLogArchive.objects.create(
            workload=workload,
            replica=0,
            attempt=1,
            pod_name="p",
            pod_uid=f"u{workload.pk}",
            container="main",
            text="x\n",
            archived_at=now - timedelta(days=age),
        )
        WorkloadArchive.objects.create(workload=workload, archived_at=now - timedelta(days=age))

    assert services.log_archive_purge(now=now) == 2
    assert list(WorkloadLogArchive.objects.values_list("workload", flat=True)) == [recent.pk]
    assert list(WorkloadArchive.objects.values_list("workload", flat=True)) == [recent.pk]
    Workload.objects.filter(pk=old.pk).update(finished_at=now - timedelta(days=31), k8s_objects=[])
    message = api_client(cast.owner).get(f"/api/v1/workloads/{old.pk}/logs/").json()["message"]
    assert message == "Logs are kept 30 days after a workload ends; these are gone."


def test_the_purge_is_a_periodic_task() -> None:
    from apps.orchestration import tasks

    assert tasks.log_archive_purge.name == taskqueue.LOG_ARCHIVE_PURGE.name
    assert taskqueue.LOG_ARCHIVE_PURGE in taskqueue.REGISTRY


# --- serving ------------------------------------------------------------------------------


@pytest.fixture
def archived(cast: Cast, cluster: Cluster, kube: FakeKube) -> Workload:
    """A two-replica job that failed; its objects are gone, its logs and events archived."""
    workload = job(cast, cluster, replicas=2)
    kube.pods = [pod(workload, f"wl-pod-{r}", replica=r) for r in (0, 1)]
    kube.logs = {"wl-pod-0": ["rank 0 ready"], "wl-pod-1": ["rank 1 ready", "rank 1: CUDA error"]}
    kube.events = [k8s_event("wl-pod-1", "BackOff", "Back-off restarting failed container")]
    assert services.workload_reconcile(workload_id=workload.pk) == "deleted"
    return workload


def test_the_api_serves_archived_logs_per_replica_and_the_archived_events(
    cast: Cast, archived: Workload
) -> None:
    client = api_client(cast.teammate)
    url = f"/api/v1/workloads/{archived.pk}/logs/"
    assert text(client.get(url)) == "rank 0 ready\n"
    assert text(client.get(f"{url}?replica=1&follow=true")) == "rank 1 ready\nrank 1: CUDA error\n"
    missing = client.get(f"{url}?replica=2")
    assert missing.status_code == 409
    assert missing.json()["message"] == "Replica 2 was not archived; archived replicas: 0, 1."
    events = client.get(f"/api/v1/workloads/{archived.pk}/events/").json()
    assert events["cluster_events_unavailable"] is None
    assert [(e["object"], e["reason"]) for e in events["cluster_events"]] == [
        ("Pod/wl-pod-1", "BackOff")
    ]


def test_a_download_is_a_text_attachment_with_a_safe_name_at_both_doors(
    cast: Cast, archived: Workload
) -> None:
    api = api_client(cast.owner).get(
        f"/api/v1/workloads/{archived.pk}/logs/?replica=1&download=true&tail=1"
    )
    assert api.status_code == 200
    assert api["Content-Type"] == "text/plain; charset=utf-8"
    expected = f'attachment; filename="workload-{archived.pk}-replica-1.log"'
    assert api["Content-Disposition"] == expected
    assert text(api) == "rank 1 ready\nrank 1: CUDA error\n"  # whole, whatever the tail

    portal = portal_client(cast.owner).get(f"/workloads/{archived.pk}/logs/download/?replica=1")
    assert portal.status_code == 200
    assert portal["Content-Disposition"] == expected
    assert portal.content == b"rank 1 ready\nrank 1: CUDA error\n"
    nothing = portal_client(cast.owner).get(f"/workloads/{archived.pk}/logs/download/?replica=7")
    assert nothing.status_code == 409


def test_the_workload_page_shows_the_archive_with_a_replica_picker(
    cast: Cast, archived: Workload
) -> None:
    client = portal_client(cast.owner)
    page = client.get(f"/workloads/{archived.pk}/logs/?replica=1").content.decode()
    assert "Archived log of replica 1, attempt 1" in page
    assert "rank 1: CUDA error" in page
    assert '<select id="log-replica" name="replica">' in page
    assert '<option value="1" selected>1</option>' in page
    assert f"/workloads/{archived.pk}/logs/download/?replica=1&amp;attempt=1" in page
    events = client.get(f"/workloads/{archived.pk}/events/").content.decode()
    assert "Archived when the workload" in events
    assert "Back-off restarting failed container" in events
    stream = b"".join(
        client.get(f"/workloads/{archived.pk}/logs/stream/?replica=1").streaming_content
    )
    assert b"rank 1: CUDA error" in stream
    assert b"event: end" in stream


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/workloads/{id}/logs/",
        "/api/v1/workloads/{id}/logs/?download=true",
        "/api/v1/workloads/{id}/logs/?attempt=1",
        "/api/v1/workloads/{id}/events/",
    ],
)
def test_outsider_gets_404_for_archived_logs_and_events_in_the_api(
    cast: Cast, archived: Workload, url: str
) -> None:
    response = api_client(cast.outsider).get(url.format(id=archived.pk))
    assert response.status_code == 404
    assert b"rank" not in response.content


@pytest.mark.parametrize(
    "url",
    [
        "/workloads/{id}/logs/",
        "/workloads/{id}/logs/download/",
        "/workloads/{id}/logs/stream/",
        "/workloads/{id}/events/",
    ],
)
def test_outsider_gets_404_for_archived_logs_and_events_in_the_portal(
    cast: Cast, archived: Workload, url: str
) -> None:
    response = portal_client(cast.outsider).get(url.format(id=archived.pk))
    assert response.status_code == 404
    assert b"rank" not in response.content


def test_a_workload_cancelled_before_it_ran_says_it_has_no_logs(
    cast: Cast, cluster: Cluster
) -> None:
    workload = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.CANCELLED,
    )
    response = api_client(cast.owner).get(f"/api/v1/workloads/{workload.pk}/logs/")
    assert response.status_code == 409
    assert "ended before it ran" in response.json()["message"]
