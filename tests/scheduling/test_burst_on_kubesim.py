"""Two simulated clusters side by side: a hub that is full and a burst cluster. Work goes to
the burst cluster only after its class's burst wait and only for a team that may burst, with
the cost told before and after; a spoke serves at once."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from deploy.devtools import kubesim as ks
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.orchestration.test_multi_cluster import jobs_on
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
WAIT = 600
BURST_TOPOLOGY = """
pools:
  - name: cloud-h100
    count: 1
    gpu: {count: 8, product: NVIDIA-H100-80GB-HBM3, memoryMiB: 81559}
"""


@pytest.fixture(scope="module")
def burst_kubesim(
    kubesim_binary: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ks.Kubesim]:
    data = tmp_path_factory.mktemp("kubesim-burst")
    topology = data / "burst.yaml"
    topology.write_text(BURST_TOPOLOGY)
    with ks.start(data / "cluster", topology=topology) as cluster:
        yield cluster


def team_with_quota(h100: Any, *, allow_burst: bool) -> Team:
    team = TeamFactory(allow_burst=allow_burst)
    TeamQuotaFactory(team=team, gpu_class=h100, guaranteed_milli=8000, limit_milli=8000)
    return team


def test_burst_cluster_takes_work_only_after_the_wait_for_teams_that_may_burst(
    kubesim: ks.Kubesim, burst_kubesim: ks.Kubesim, settings: Any
) -> None:
    settings.SCHEDULING_BURST_WAIT_SECONDS = {**settings.SCHEDULING_BURST_WAIT_SECONDS}
    settings.SCHEDULING_BURST_WAIT_SECONDS["training"] = WAIT
    forget_clients()
    hub = Cluster.objects.create(name="hub", kubeconfig_path=str(kubesim.kubeconfig))
    cloud = Cluster.objects.create(
        name="cloud",
        kubeconfig_path=str(burst_kubesim.kubeconfig),
        role=Cluster.Role.BURST,
        gpu_hourly_cost=Decimal("9.50"),
    )
    h100 = GpuClassFactory(hourly_cost=Decimal("4.50"))
    services.cluster_inventory_sync(cluster=hub)
    services.cluster_inventory_sync(cluster=cloud)

    # The hub is full: another team's jobs hold all GPUs of its four H100 nodes.
    busy = TeamFactory()
    TeamQuotaFactory(team=busy, gpu_class=h100, guaranteed_milli=32000, limit_milli=32000)
    for i in range(4):
        WorkloadFactory(
            team=busy,
            gpu_class=h100,
            gpu_milli=8000,
            state=wl.RUNNING,
            cluster=hub,
            admitted_at=timezone.now(),
            started_at=timezone.now(),
            placement={
                "cluster": "hub",
                "replicas": [{"node": f"h100-{i}", "gpus": list(range(8)), "units": 1000}],
            },
        )

    may, may_not = team_with_quota(h100, allow_burst=True), team_with_quota(h100, allow_burst=False)
    image = ImageFactory()

    def submit(team: Team) -> Workload:
        owner = UserFactory()
        team.memberships.create(user=owner)
        services.team_namespace_ensure(team=team)
        return workload_submit(
            actor=owner,
            team=team,
            gpu_class=h100,
            image=image,
            request=WorkloadRequest.of(
                kind="training",
                name="big",
                gpu_milli=8000,
                priority_class=wl.PRIORITY_TRAINING,
                command=["python", "train.py"],
                params={"pod_annotations": {"kubesim.io/run-duration": "1h"}},
            ),
        )

    bursting, staying = submit(may), submit(may_not)
    start = timezone.now()
    run = scheduling_cycle_run(now=start)
    assert run.admitted == ()
    bursting.refresh_from_db()
    staying.refresh_from_db()
    assert (bursting.state, staying.state) == (wl.QUEUED, wl.QUEUED)
    # Before: the cost of bursting is told to the team that may burst, and only to it.
    (offer,) = [a for a in bursting.scheduling_advice if "burst" in a]
    assert "burst cluster cloud" in offer
    assert "76.00 per hour there (36.00 per hour on the hub and spoke clusters)" in offer
    assert not any("burst" in a for a in staying.scheduling_advice)

    # Not before the class's wait.
    assert scheduling_cycle_run(now=start + timedelta(seconds=WAIT - 60)).admitted == ()
    # After it: the team that may burst runs on the burst cluster; the other keeps waiting.
    run = scheduling_cycle_run(now=start + timedelta(seconds=WAIT + 5))
    assert run.admitted == (bursting.pk,)
    bursting.refresh_from_db()
    assert bursting.cluster == cloud
    assert "On burst cluster cloud" in bursting.last_reason
    assert "76.00 per hour there" in bursting.last_reason  # after: the cost, told again
    services.workload_reconcile(workload_id=bursting.pk)
    assert len(jobs_on(burst_kubesim.kubeconfig, may.namespace, bursting)) == 1
    assert jobs_on(kubesim.kubeconfig, may.namespace, bursting) == []

    def running() -> bool:
        services.status_sync_pass(cluster=cloud)
        bursting.refresh_from_db()
        return bursting.state == wl.RUNNING

    wait_for(running)
    staying.refresh_from_db()
    assert staying.state == wl.QUEUED

    # A spoke serves at once, whoever asks: the cloud cluster turned spoke takes the other
    # team's job (once the burst job is gone) without a wait.
    Workload.objects.filter(pk=bursting.pk).update(state=wl.SUCCEEDED, finished_at=timezone.now())
    Cluster.objects.filter(pk=cloud.pk).update(role=Cluster.Role.SPOKE)
    run = scheduling_cycle_run(now=start + timedelta(seconds=1))
    assert run.admitted == (staying.pk,)
    staying.refresh_from_db()
    assert staying.cluster == cloud
    assert "burst" not in staying.last_reason
