"""A cluster that is still starting is named as such at once: the STARTING file its tool writes
beside the kubeconfig (apps.orchestration.starting) turns every cluster call into "the cluster
is starting (what it is doing)", 503 with Retry-After in the API, the form's error in the
portal, and a workload reason said once in the worker's log."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster
from apps.credentials.models import Secret
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients, kube_for
from apps.orchestration.errors import (
    STARTING_RETRY_AFTER_SECONDS,
    ClusterStarting,
    ClusterUnreachable,
    cluster_error_answer,
    cluster_retry_after,
)
from apps.orchestration.starting import starting_step
from apps.workloads import core
from apps.workloads.models import Workload
from deploy.devtools.kubesim import StartingMarker
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

STEP = "building the cluster, 1200 of 2632 packages (46%), 2.5 min elapsed, about 3 min left"


def _marker(folder: Path, *, pid: int | None = None, step: str = STEP) -> None:
    (folder / "STARTING").write_text(json.dumps({"pid": pid or os.getpid(), "step": step}))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_marker_says_starting_only_while_its_process_lives_and_the_cluster_is_not_ready(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "admin.kubeconfig"
    assert starting_step(kubeconfig) is None  # no marker: a cluster nobody is bringing up
    _marker(tmp_path)
    assert starting_step(kubeconfig) == STEP
    (tmp_path / "READY").write_text("{}")
    assert starting_step(kubeconfig) is None  # up: the kubeconfig is this run's
    (tmp_path / "READY").unlink()
    _marker(tmp_path, pid=_dead_pid())
    assert starting_step(kubeconfig) is None  # its tool died: stale, not "starting" for ever
    (tmp_path / "STARTING").write_text("not json")
    assert starting_step(kubeconfig) is None
    _marker(tmp_path, step="")
    assert starting_step(kubeconfig) == "starting"


def test_the_answer_names_the_step_and_when_to_ask_again() -> None:
    answer = cluster_error_answer(ClusterStarting("dev", STEP))
    assert answer.status == 503
    assert answer.message == f"The cluster is starting ({STEP}); try again in a few minutes."
    assert cluster_retry_after(ClusterStarting("dev", STEP)) == STARTING_RETRY_AFTER_SECONDS
    assert cluster_retry_after(ClusterUnreachable("down")) == 0
    # Still "unreachable" to everything that retries those.
    assert isinstance(ClusterStarting("dev", STEP), ClusterUnreachable)


@pytest.fixture
def starting_cluster(tmp_path: Path, db: None) -> Cluster:
    """A registered cluster whose tool says it is building: the kubeconfig of an earlier run
    is still there (as var/kubesim/admin.kubeconfig is), pointing at a server that is gone."""
    (tmp_path / "admin.kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    _marker(tmp_path)
    forget_clients()
    return Cluster.objects.create(name="dev", kubeconfig_path=str(tmp_path / "admin.kubeconfig"))


@pytest.mark.django_db
def test_a_client_for_a_starting_cluster_is_refused_at_once(starting_cluster: Cluster) -> None:
    started = time.monotonic()
    with pytest.raises(ClusterStarting) as starting:
        kube_for(starting_cluster)
    assert time.monotonic() - started < 0.1
    assert starting.value.step == STEP
    assert str(starting.value) == f"Cluster dev is starting: {STEP}"


@pytest.mark.django_db
def test_a_secret_saved_while_the_cluster_starts_gets_the_answer_at_once_in_both_doors(
    cast: Cast, starting_cluster: Cluster
) -> None:
    _, token = api_token_create(
        actor=cast.lead, name="w", scopes=["read", "write"], expires_at=None
    )
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    api.get("/api/v1/")  # imports the URL configuration: not timed
    started = time.monotonic()
    answer = api.post(
        f"/api/v1/teams/{cast.team.slug}/secrets/",
        {"name": "hf", "data": {"token": "v"}},
        format="json",
    )
    took = time.monotonic() - started
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == str(STARTING_RETRY_AFTER_SECONDS)
    assert answer.json()["code"] == "cluster_starting"
    assert answer.json()["message"].startswith(f"The cluster is starting ({STEP})")
    assert took < 1.0, took

    portal = Client()
    portal.force_login(cast.lead)
    page = portal.post(
        f"/teams/{cast.team.slug}/secrets/",
        {"name": "hf", "key": "token", "value": "v"},
        follow=True,
    )
    assert "The cluster is starting (building the cluster" in page.content.decode()
    assert not Secret.objects.exists()  # nothing half-saved


@pytest.mark.django_db
def test_a_workload_says_the_cluster_is_starting_and_the_worker_says_it_once(
    cast: Cast, starting_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    workload: Workload = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.ADMITTED,
        cluster=starting_cluster,
    )
    with caplog.at_level(logging.WARNING, logger="apps.orchestration.services.objects"):
        for _ in range(4):  # the task's retries
            with pytest.raises(ClusterStarting):
                services.workload_reconcile(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.last_reason == services.STARTING_REASON
    assert workload.state == core.ADMITTED
    said = [r.getMessage() for r in caplog.records if "is starting" in r.getMessage()]
    assert len(said) == 1, said


def test_the_up_command_marks_the_data_dir_in_words_and_forgets_an_earlier_ready(
    tmp_path: Path,
) -> None:
    (tmp_path / "READY").write_text("{}")  # the earlier run's
    marker = StartingMarker(tmp_path)
    assert not (tmp_path / "READY").exists()
    marker.say("kubesim: building, 12 of 2632 packages (0%), 0.5 min elapsed")
    info = json.loads((tmp_path / "STARTING").read_text())
    assert info["pid"] == os.getpid()
    assert info["step"] == "building the cluster, 12 of 2632 packages (0%), 0.5 min elapsed"
    assert starting_step(tmp_path / "admin.kubeconfig") == info["step"]
    marker.say("coredns: building, 1 of 400 packages (0%), 0.5 min elapsed")
    assert starting_step(tmp_path / "admin.kubeconfig").startswith("building CoreDNS, 1 of 400")
    marker.clear()
    assert starting_step(tmp_path / "admin.kubeconfig") is None
