"""A running trial's latest metrics line, read from the end of its pod's log while it runs and
shown in the trials table (portal and API) before its log is archived; bounded reads.

A stand-in adapter plays the cluster (tests/orchestration/test_sweeps_on_kubesim.py reads a
running trial's log through the simulated cluster's pod log API)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from apps.catalog.models import Cluster
from apps.orchestration import cluster_reads, clusters, services
from apps.orchestration import manifests as m
from apps.orchestration.errors import ClusterRefused, ClusterUnreachable
from apps.orchestration.models import LiveMetrics, WorkloadLogArchive
from apps.orchestration.selectors import sweep_trials
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit, workload_transition
from tests.orchestration.test_log_archive import FakeKube, pod
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def kube(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube()
    monkeypatch.setattr(clusters, "kube_for", lambda cluster: fake)
    monkeypatch.setattr(cluster_reads, "_kube", lambda cluster: fake)
    return fake


@pytest.fixture
def cluster(db: None) -> Cluster:
    return Cluster.objects.create(name="c1", kubeconfig_path="/nowhere")


def running_sweep(cast: Cast, cluster: Cluster, points: int = 3) -> list[Workload]:
    sweep = workload_submit(
        actor=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        request=WorkloadRequest.of(
            kind=core.KIND_SWEEP,
            name="lr",
            gpu_milli=1000,
            command=["python", "train.py", "--lr={lr}"],
            grid={"lr": [str(i) for i in range(points)]},
        ),
    )
    trials = list(sweep.trials.order_by("trial_index"))
    Workload.objects.filter(pk__in=[t.pk for t in trials]).update(cluster=cluster)
    return trials


def run(trial: Workload, *states: str) -> None:
    for state in states:
        assert workload_transition(workload=trial, to_state=state, reason=state)


def trial_pod(trial: Workload, name: str, phase: str = "Running", **kw: Any) -> dict[str, Any]:
    found = pod(trial, name, status={"phase": phase}, **kw)
    found["metadata"]["labels"][m.LABEL_KIND] = core.KIND_SWEEP
    return found


def test_a_running_trials_latest_metrics_line_is_shown_before_it_ends(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    first, second, waiting = running_sweep(cast, cluster)
    run(first, core.QUEUED, core.ADMITTED, core.RUNNING)
    run(second, core.QUEUED, core.ADMITTED, core.RUNNING)
    kube.pods = [trial_pod(first, "p-first"), trial_pod(second, "p-second")]
    kube.logs["p-first"] = [
        "2026-01-01T00:00:01Z epoch 1",
        '2026-01-01T00:00:02Z {"epoch": 1, "loss": 0.9}',
        "2026-01-01T00:00:03Z saving checkpoint",
    ]
    kube.logs["p-second"] = ["2026-01-01T00:00:01Z warming up"]
    result = services.trial_metrics_pass(cluster=cluster)
    assert (result.read, result.lines) == (2, 1)
    assert kube.calls.count("log p-first") == 1 and "log p-second" in kube.calls
    rows = {r.id: r for r in sweep_trials(first.sweep)}  # type: ignore[arg-type]
    assert rows[first.pk].last_metrics_line == '{"epoch": 1, "loss": 0.9}'
    assert rows[first.pk].last_metrics_at is not None
    assert rows[first.pk].last_metrics_at.isoformat() == "2026-01-01T00:00:02+00:00"
    assert rows[second.pk].last_metrics_line is None  # nothing printed that reads as metrics
    assert rows[waiting.pk].last_metrics_line is None

    api = APIClient()
    api.force_authenticate(cast.owner)
    body = api.get(f"/api/v1/workloads/{first.sweep_id}/trials/").json()
    shown = {t["id"]: t for t in body["trials"]}
    assert shown[first.pk]["state"] == core.RUNNING
    assert shown[first.pk]["last_metrics_line"] == '{"epoch": 1, "loss": 0.9}'
    assert shown[first.pk]["last_metrics_at"] == "2026-01-01T00:00:02Z"
    portal = Client()
    portal.force_login(cast.owner)
    page = portal.get(f"/workloads/{first.sweep_id}/").content.decode()
    assert "{&quot;epoch&quot;: 1, &quot;loss&quot;: 0.9}" in page
    # The outsider sees none of it.
    outsider = APIClient()
    outsider.force_authenticate(cast.outsider)
    assert outsider.get(f"/api/v1/workloads/{first.sweep_id}/trials/").status_code == 404


def test_reads_are_bounded_running_trials_only_once_per_interval_the_tail_only(
    cast: Cast, cluster: Cluster, kube: FakeKube, settings: Any
) -> None:
    settings.ORCHESTRATION_TRIAL_METRICS_SECONDS = 15
    trial, starting, _ = running_sweep(cast, cluster)
    run(trial, core.QUEUED, core.ADMITTED, core.RUNNING)
    run(starting, core.QUEUED, core.ADMITTED, core.STARTING)
    kube.pods = [trial_pod(trial, "p"), trial_pod(starting, "q", phase="Pending")]
    kube.logs["p"] = [f"2026-01-01T00:00:{i:02d}Z step={i}" for i in range(60)] + [
        "x" for _ in range(200)
    ]
    now = timezone.now()
    assert services.trial_metrics_pass(cluster=cluster, now=now).read == 1
    assert "log q" not in kube.calls  # only running trials
    # The last 100 lines only: the metrics lines are further up, so none is found.
    assert LiveMetrics.objects.get(workload=trial).line == ""
    kube.logs["p"] = ["2026-01-01T00:01:00Z step=60 loss=0.5", "done"]
    kube.calls.clear()
    assert services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=5)).read == 0
    assert kube.calls == []  # read at most once per interval: not even a list
    assert services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=16)).read == 1
    assert LiveMetrics.objects.get(workload=trial).line == "step=60 loss=0.5"
    # A tail without metrics keeps the line read before.
    kube.logs["p"] = ["2026-01-01T00:02:00Z writing checkpoint"]
    services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=40))
    assert LiveMetrics.objects.get(workload=trial).line == "step=60 loss=0.5"


def test_once_ended_the_archived_logs_newer_line_wins(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    trial, _, _ = running_sweep(cast, cluster)
    run(trial, core.QUEUED, core.ADMITTED, core.RUNNING)
    kube.pods = [trial_pod(trial, "p")]
    kube.logs["p"] = ["2026-01-01T00:00:05Z loss=0.5"]
    services.trial_metrics_pass(cluster=cluster)
    assert workload_transition(
        workload=trial, to_state=core.SUCCEEDED, reason="completed", extra={"exit_code": 0}
    )
    WorkloadLogArchive.objects.create(
        workload=trial,
        replica=0,
        attempt=1,
        pod_name="p",
        pod_uid="uid-p",
        container="main",
        text="2026-01-01T00:00:05Z loss=0.5\n2026-01-01T00:09:00Z loss=0.1 acc=0.97\nbye\n",
    )
    (row,) = [r for r in sweep_trials(trial.sweep) if r.id == trial.pk]  # type: ignore[arg-type]
    assert (row.state, row.last_metrics_line) == (core.SUCCEEDED, "loss=0.1 acc=0.97")


def test_a_log_that_cannot_be_read_is_reported_and_the_others_are_still_read(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    one, two, _ = running_sweep(cast, cluster)
    for trial in (one, two):
        run(trial, core.QUEUED, core.ADMITTED, core.RUNNING)
    kube.pods = [trial_pod(one, "a"), trial_pod(two, "b")]
    kube.logs["a"] = ClusterRefused("container is waiting to start", status=400)
    kube.logs["b"] = ["acc=0.5"]
    result = services.trial_metrics_pass(cluster=cluster)
    assert result.read == 1 and len(result.problems) == 1
    assert LiveMetrics.objects.get(workload=two).line == "acc=0.5"
    kube.logs["b"] = ClusterUnreachable("connection refused")
    with pytest.raises(ClusterUnreachable):
        services.trial_metrics_pass(cluster=cluster, now=timezone.now() + timedelta(minutes=1))


def running_training(cast: Cast, cluster: Cluster, replicas: int = 1) -> Workload:
    job = workload_submit(
        actor=cast.owner,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        request=WorkloadRequest.of(
            kind=core.KIND_TRAINING,
            name="long",
            gpu_milli=1000,
            replicas=replicas,
            command=["gpupaas-train"],
        ),
    )
    Workload.objects.filter(pk=job.pk).update(cluster=cluster)
    job.refresh_from_db()
    run(job, core.QUEUED, core.ADMITTED, core.RUNNING)
    return job


def training_pod(job: Workload, name: str, replica: int | None = None) -> dict[str, Any]:
    found = pod(job, name, replica=replica, status={"phase": "Running"})
    found["metadata"]["labels"][m.LABEL_KIND] = core.KIND_TRAINING
    return found


def test_the_metrics_pass_keeps_a_training_jobs_last_reported_checkpoint(
    cast: Cast, cluster: Cluster, kube: FakeKube, settings: Any
) -> None:
    settings.ORCHESTRATION_TRIAL_METRICS_SECONDS = 15
    job = running_training(cast, cluster)
    kube.pods = [training_pod(job, "t")]
    kube.logs["t"] = [
        '2026-01-01T00:00:09Z {"step": 9, "loss": 0.5}',
        '2026-01-01T00:00:10Z {"step": 10, "loss": 0.4}',
        '2026-01-01T00:00:10.5Z {"checkpoint": {"step": 10, "at": "2026-01-01T00:00:10Z"}}',
        '2026-01-01T00:00:11Z {"step": 11, "loss": 0.3}',
        '2026-01-01T00:00:12Z {"checkpoint": {"step": 12, "at": "2027-01-01T00:00:00Z"}}',
    ]
    now = timezone.now()
    result = services.trial_metrics_pass(cluster=cluster, now=now)
    assert (result.read, result.checkpoints) == (1, 1)
    job.refresh_from_db()
    # The newest report wins; its time is the line's (a program cannot claim a later one).
    assert job.checkpoint_step == 12
    assert job.checkpoint_at is not None
    assert job.checkpoint_at.isoformat() == "2026-01-01T00:00:12+00:00"
    # A checkpoint report is not the run's metrics line: the step before it stays.
    assert LiveMetrics.objects.get(workload=job).line == '{"step": 11, "loss": 0.3}'

    # A tail without a report keeps the one read before; an older one never goes back.
    kube.logs["t"] = ['2026-01-01T00:00:20Z {"step": 20, "loss": 0.1}']
    assert services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=16)).read == 1
    kube.logs["t"] = ['2026-01-01T00:00:05Z {"checkpoint": {"step": 5}}']
    assert services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=32)).read == 1
    job.refresh_from_db()
    assert job.checkpoint_step == 12
    # A report on a metrics line counts too; "at" earlier than the line is taken as said.
    kube.logs["t"] = [
        '2026-01-01T00:01:00Z {"step": 60, "checkpoint": '
        '{"step": 60, "at": "2026-01-01T00:00:59Z"}}'
    ]
    result = services.trial_metrics_pass(cluster=cluster, now=now + timedelta(seconds=48))
    assert result.checkpoints == 1
    job.refresh_from_db()
    assert (job.checkpoint_step, job.checkpoint_at.isoformat()) == (
        60,
        "2026-01-01T00:00:59+00:00",
    )
    # What the scheduler reads of it.
    snapshot = scheduling_snapshot(now=timezone.now(), half_life_seconds=3600)
    (running,) = [r for r in snapshot.running if r.id == job.pk]
    assert (running.checkpoint_step, running.checkpoint_at) == (60, job.checkpoint_at)


def test_a_gangs_checkpoint_is_read_from_replica_zero_the_rank_that_saves(
    cast: Cast, cluster: Cluster, kube: FakeKube
) -> None:
    job = running_training(cast, cluster, replicas=2)
    kube.pods = [training_pod(job, "r0", replica=0), training_pod(job, "r1", replica=1)]
    kube.logs["r0"] = ['2026-01-01T00:00:10Z {"checkpoint": {"step": 10}}']
    kube.logs["r1"] = ['2026-01-01T00:00:11Z {"step": 11, "loss": 0.3}']
    services.trial_metrics_pass(cluster=cluster)
    assert "log r1" not in kube.calls
    job.refresh_from_db()
    assert job.checkpoint_step == 10
