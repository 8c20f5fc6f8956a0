"""The read module finds objects by the names stored when they were created (a stand-in
adapter records what is asked of the cluster)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from django.core.cache import caches

from apps.catalog.models import Cluster
from apps.orchestration import cluster_reads
from apps.orchestration.errors import ClusterUnreachable
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


class RecordingKube:
    def __init__(self, objects: dict[tuple[str, str, str], dict[str, Any]]) -> None:
        self.objects = objects
        self.asked: list[tuple[str, str, str]] = []

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        self.asked.append((kind, namespace or "", name))
        return self.objects.get((kind, namespace or "", name))


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> RecordingKube:
    fake = RecordingKube({})
    monkeypatch.setattr(cluster_reads, "_kube", lambda cluster: fake)
    return fake


def notebook(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "kind": core.KIND_NOTEBOOK,
        "state": core.RUNNING,
    }
    values.update(kw)
    if "cluster" not in kw:
        values["cluster"] = Cluster.objects.create(name="c1", kubeconfig_path="/nowhere")
    return WorkloadFactory(**values)


def test_the_token_is_read_from_the_secret_named_when_it_was_created(
    cast: Cast, kube: RecordingKube
) -> None:
    namespace = cast.team.namespace
    # Whatever the naming scheme was then, the stored name is the one read.
    workload = notebook(
        cast,
        k8s_objects=[
            {"kind": "StatefulSet", "namespace": namespace, "name": "nb-old-scheme"},
            {"kind": "Secret", "namespace": namespace, "name": "nb-old-scheme-jupyter"},
        ],
    )
    kube.objects[("Secret", namespace, "nb-old-scheme-jupyter")] = {
        "data": {"token": base64.b64encode(b"s3cret").decode()}
    }
    assert cluster_reads.notebook_token(workload) == "s3cret"
    assert kube.asked == [("Secret", namespace, "nb-old-scheme-jupyter")]


def test_a_notebook_without_a_stored_secret_is_still_starting(
    cast: Cast, kube: RecordingKube
) -> None:
    workload = notebook(cast, k8s_objects=[])
    with pytest.raises(cluster_reads.NotebookUnavailable, match="still starting"):
        cluster_reads.notebook_token(workload)
    assert kube.asked == []


def test_an_unplaced_notebook_says_so(cast: Cast, kube: RecordingKube) -> None:
    workload = notebook(cast, cluster=None, state=core.QUEUED)
    with pytest.raises(cluster_reads.NotebookUnavailable, match="not been placed"):
        cluster_reads.notebook_token(workload)


def test_cluster_errors_are_not_hidden_in_a_notebook_error(
    cast: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(cluster: Cluster) -> Any:
        raise ClusterUnreachable("get Secret: connection refused")

    monkeypatch.setattr(cluster_reads, "_kube", unreachable)
    workload = notebook(cast, k8s_objects=[{"kind": "Secret", "namespace": "x", "name": "y"}])
    with pytest.raises(ClusterUnreachable):
        cluster_reads.notebook_token(workload)


def test_the_ingress_token_is_kept_briefly_in_memory_and_read_again_after_a_restart(
    cast: Cast, kube: RecordingKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    caches[cluster_reads.NOTEBOOK_TOKENS_CACHE].clear()
    namespace = cast.team.namespace
    workload = notebook(
        cast,
        started_at=timezone.now(),
        admitted_at=timezone.now(),
        k8s_objects=[{"kind": "Secret", "namespace": namespace, "name": "nb-token"}],
    )
    kube.objects[("Secret", namespace, "nb-token")] = {
        "data": {"token": base64.b64encode(b"first").decode()}
    }
    # The ingress asks for every request of a notebook: one read serves many.
    assert [cluster_reads.notebook_token_for_ingress(workload) for _ in range(3)] == ["first"] * 3
    assert len(kube.asked) == 1
    # Resumed, the notebook has a new Secret and a new admission (its first start stays as it
    # was): it is read again.
    kube.objects[("Secret", namespace, "nb-token")] = {
        "data": {"token": base64.b64encode(b"second").decode()}
    }
    assert cluster_reads.notebook_token_for_ingress(workload) == "first"
    workload.admitted_at = timezone.now() + timedelta(seconds=1)
    assert cluster_reads.notebook_token_for_ingress(workload) == "second"
    assert len(kube.asked) == 2
    assert workload.started_at is not None  # unchanged by the resume
