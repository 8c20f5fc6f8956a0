"""Topology-aware gangs through the real path, on the simulated cluster: the nodes carry
Kueue's documented example labels for blocks and racks, the inventory reads them, and a
multi-node training job that asks for one rack gets its replicas' pods on nodes of one rack;
a second gang that requires a whole rack gets the other rack."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import services
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_cancel, workload_submit
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.orchestration.test_preemption_on_kubesim import pods_of
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
# h100-0 and h100-2 share rack r1; h100-1 and h100-3 rack r2 (name order interleaves them, as
# hostnames often do); one block.
RACKS = {"h100-0": "r1", "h100-1": "r2", "h100-2": "r1", "h100-3": "r2"}


@pytest.fixture
def racks(
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
) -> Iterator[None]:
    for node, rack in RACKS.items():
        core_api.patch_node(node, {"metadata": {"labels": {BLOCK: "b1", RACK: rack}}})
    services.cluster_inventory_sync(cluster=cluster)
    yield
    for node in RACKS:
        core_api.patch_node(node, {"metadata": {"labels": {BLOCK: None, RACK: None}}})
    services.cluster_inventory_sync(cluster=cluster)


def gang(team: Team, actor: Any, name: str, gpus: int, ask: dict[str, Any] | None) -> Workload:  # noqa: F811
    return workload_submit(
        actor=actor,
        team=team,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name=name,
            gpu_milli=gpus * 1000,
            replicas=2,
            command=["python", "train.py"],
            topology=ask,
            params={"pod_annotations": {"kubesim.io/run-duration": "30m"}},
        ),
    )


def pinned_nodes(pod: Any) -> set[str]:
    terms = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    return {
        value
        for term in terms.node_selector_terms
        for field in term.match_fields or ()
        if field.key == "metadata.name"
        for value in field.values
    }


def test_a_gang_that_asks_for_one_rack_runs_in_one_rack(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    racks: None,
    settings: Any,
) -> None:
    h100 = GpuClassFactory()
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=32000, limit_milli=32000
    )
    owner = UserFactory()
    team.memberships.create(user=owner)

    # Asked for: the two replicas' pods on the two nodes of one rack.
    together = gang(team, owner, "together", 4, {"level": "rack", "required": True})
    assert together.params["topology"] == {"level": "rack", "required": True}
    assert scheduling_cycle_run().admitted == (together.pk,)
    services.workload_reconcile(workload_id=together.pk)
    # The pods as created in the cluster: each may land only on the nodes gpupaas chose (the
    # cluster is shared with earlier tests, whose pods may still run there, so where they are
    # running is not waited for).
    pods = wait_for(
        lambda: pods_of(core_api, together) if len(pods_of(core_api, together)) == 2 else None, 30
    )
    nodes = {node for pod in pods for node in pinned_nodes(pod)}
    assert len(nodes) == 2 and len({RACKS[n] for n in nodes}) == 1, nodes

    # A second gang of 8 GPUs per replica requires a whole rack: the rack that holds 4 GPUs
    # on each node cannot, the other can.
    whole = gang(team, owner, "whole-rack", 8, {"level": "rack", "required": True})
    assert scheduling_cycle_run().admitted == (whole.pk,)
    whole.refresh_from_db()
    placed = {r["node"] for r in whole.placement["replicas"]}
    assert {RACKS[n] for n in placed} == {"r1", "r2"} - {RACKS[n] for n in nodes}

    # The ask is recorded with the workload (a clone asks the same).
    assert WorkloadRequest.of(
        **{"kind": "training", "name": "c", "gpu_milli": 8000, "params": whole.params}
    ).topology == {"level": "rack", "required": True}
    for w in (together, whole):
        w.refresh_from_db()
        workload_cancel(actor=owner, workload=w)
        services.workload_reconcile(workload_id=w.pk)
    wait_for(lambda: not pods_of(core_api, together) and not pods_of(core_api, whole), 30)


def test_a_topology_ask_is_refused_with_a_message_where_it_cannot_mean_anything(
    team: Team,  # noqa: F811 - the fixture
) -> None:
    owner = UserFactory()
    team.memberships.create(user=owner)
    with pytest.raises(ValidationError) as unknown:
        gang(team, owner, "x", 1, {"level": "row"})
    assert unknown.value.message_dict["topology"] == [
        "Unknown topology level 'row': one of block, rack, nvlink."
    ]
    with pytest.raises(ValidationError) as single:
        workload_submit(
            actor=owner,
            team=team,
            gpu_class=GpuClassFactory(),
            image=ImageFactory(),
            request=WorkloadRequest.of(
                kind="training",
                name="one",
                gpu_milli=1000,
                command=["python", "train.py"],
                topology={"level": "rack"},
            ),
        )
    assert "2 or more replicas" in single.value.message_dict["topology"][0]
