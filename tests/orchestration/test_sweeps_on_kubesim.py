"""A sweep of trials on the simulated cluster: 20 trials of a quarter GPU on a time-sliced
class, at most 4 at once, each admitted, placed, run and charged on its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster, GpuClass
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.orchestration.models import LiveMetrics
from apps.orchestration.selectors import sweep_trials
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.selectors import quota_usage_for_teams
from apps.workloads.services import workload_cancel, workload_submit
from deploy.devtools.kubesim import Kubesim
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]

TRIALS = 20
PARALLELISM = 4


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def team(cluster: Cluster, kube_api_client: Any) -> Iterator[Team]:
    team = TeamFactory()
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_sweep_runs_every_trial_never_more_than_its_parallelism_at_once(
    team: Team, cluster: Cluster, kube_api_client: Any
) -> None:
    timeslice = GpuClass.objects.create(
        name="L40S",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode="timeslice",
        timeslice_replicas=4,
        capacity_gpus=8,
    )
    # Room for far more than four quarter-GPU trials: only the cap holds them back.
    TeamQuotaFactory(team=team, gpu_class=timeslice, guaranteed_milli=4000, limit_milli=8000)
    services.team_namespace_ensure(team=team)
    services.cluster_inventory_sync(cluster=cluster)
    owner = UserFactory()
    team.memberships.create(user=owner)
    sweep = workload_submit(
        actor=owner,
        team=team,
        gpu_class=timeslice,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind=wl.KIND_SWEEP,
            name="seeds",
            gpu_milli=250,
            command=["python", "train.py"],
            grid={"seed": [str(i) for i in range(TRIALS)]},
            parallelism=PARALLELISM,
            params={"pod_annotations": {"kubesim.io/run-duration": "2s"}},
        ),
    )
    trials = Workload.objects.filter(sweep=sweep)
    assert trials.count() == TRIALS
    charged = trials.first().charged_milli  # type: ignore[union-attr]
    core = k8s.CoreV1Api(kube_api_client)
    ids = {str(pk) for pk in trials.values_list("pk", flat=True)}

    most_held = most_pods = 0
    deadline = time.monotonic() + 300
    while True:
        scheduling_cycle_run()
        for trial in trials.filter(state__in=wl.ACTIVE_STATES):
            services.workload_reconcile(workload_id=trial.pk)
        services.status_sync_pass(cluster=cluster)

        held = trials.filter(state__in=wl.ACTIVE_STATES).count()
        pods = [
            p
            for p in core.list_namespaced_pod(team.namespace, label_selector=m.LABEL_WORKLOAD).items
            if p.metadata.labels.get(m.LABEL_WORKLOAD) in ids
            and p.status.phase in ("Pending", "Running")
        ]
        most_held, most_pods = max(most_held, held), max(most_pods, len(pods))
        assert held <= PARALLELISM
        assert len(pods) <= PARALLELISM
        (usage,) = [u for u in quota_usage_for_teams([team]) if u.gpu_class == timeslice]
        assert usage.used_milli == held * charged  # each running trial, not the sweep

        if not trials.exclude(state__in=wl.TERMINAL_STATES).exists():
            break
        assert time.monotonic() < deadline, list(trials.values_list("state", "last_reason"))
        time.sleep(0.5)

    print(
        f"sweep of {TRIALS} trials, parallelism {PARALLELISM}: at most {most_held} trials "
        f"held GPUs and {most_pods} pods ran at once"
    )
    assert most_held == PARALLELISM
    assert set(trials.values_list("state", flat=True)) == {wl.SUCCEEDED}
    assert set(trials.values_list("exit_code", flat=True)) == {0}
    sweep.refresh_from_db()
    assert sweep.state == wl.SUCCEEDED, sweep.last_reason
    assert sweep.last_reason == f"All {TRIALS} trials succeeded."
    rows = sweep_trials(sweep)
    assert [r.index for r in rows] == list(range(TRIALS))
    assert [r.params for r in rows] == [{"seed": str(i)} for i in range(TRIALS)]
    assert all(r.runtime_seconds is not None and r.attempts >= 1 for r in rows)


def test_a_running_trials_log_is_read_for_its_metrics_through_the_pod_log_api(
    team: Team, cluster: Cluster, kube_api_client: Any, settings: Any
) -> None:
    """The pass reads the end of each running trial's pod log from the cluster (the simulated
    kubelet's lines hold no metrics: what it keeps is that it read, from which pod), at most
    once per interval, and only running trials."""
    settings.ORCHESTRATION_TRIAL_METRICS_SECONDS = 30
    h100 = GpuClass.objects.create(
        name="H100-80GB", product_label="NVIDIA-H100-80GB-HBM3", memory_mib=81559
    )
    TeamQuotaFactory(team=team, gpu_class=h100, guaranteed_milli=2000, limit_milli=2000)
    services.team_namespace_ensure(team=team)
    services.cluster_inventory_sync(cluster=cluster)
    owner = UserFactory()
    team.memberships.create(user=owner)
    sweep = workload_submit(
        actor=owner,
        team=team,
        gpu_class=h100,
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind=wl.KIND_SWEEP,
            name="live",
            gpu_milli=1000,
            command=["python", "train.py", "--seed={seed}"],
            grid={"seed": ["1", "2", "3"]},
            parallelism=1,
            params={"pod_annotations": {"kubesim.io/run-duration": "60s"}},
        ),
    )
    trials = Workload.objects.filter(sweep=sweep)

    def one_running() -> Workload | None:
        scheduling_cycle_run()
        for trial in trials.filter(state__in=wl.ACTIVE_STATES):
            services.workload_reconcile(workload_id=trial.pk)
        services.status_sync_pass(cluster=cluster)
        return trials.filter(state=wl.RUNNING).first()

    running = wait_for(one_running, timeout=60)
    result = services.trial_metrics_pass(cluster=cluster)
    assert (result.read, result.problems) == (1, [])
    kept = LiveMetrics.objects.get(workload=running)
    (pod,) = [
        p.metadata.name
        for p in k8s.CoreV1Api(kube_api_client)
        .list_namespaced_pod(team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={running.pk}")
        .items
    ]
    assert (kept.pod_name, kept.line) == (pod, "")
    assert LiveMetrics.objects.filter(workload__sweep=sweep).count() == 1  # the others wait
    assert services.trial_metrics_pass(cluster=cluster).read == 0  # within the interval
    (row,) = [r for r in sweep_trials(sweep) if r.id == running.pk]
    assert row.args == [] and row.command == ["python", "train.py", f"--seed={row.params['seed']}"]
    workload_cancel(actor=owner, workload=sweep)
    for trial in trials:
        services.workload_reconcile(workload_id=trial.pk)  # its pods go
