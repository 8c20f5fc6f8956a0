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
from apps.orchestration.selectors import sweep_trials
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import quota_usage_for_teams
from apps.workloads.services import workload_submit
from deploy.devtools.kubesim import Kubesim
from tests.factories import ImageFactory, TeamFactory, TeamQuotaFactory, UserFactory

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
        kind=wl.KIND_SWEEP,
        name="seeds",
        gpu_class=timeslice,
        image=ImageFactory(),
        gpu_milli=250,
        command=["python", "train.py"],
        grid={"seed": [str(i) for i in range(TRIALS)]},
        parallelism=PARALLELISM,
        params={"pod_annotations": {"kubesim.io/run-duration": "2s"}},
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
