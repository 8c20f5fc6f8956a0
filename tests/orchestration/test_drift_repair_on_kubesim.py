"""Drift repair on the simulated cluster: what gpupaas set up for a team, changed or deleted by
hand, is restored by one pass; a second pass finds nothing to do."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.workloads import core as wl
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


def test_hand_edits_and_deletions_are_restored_in_one_pass(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    kube_api_client: Any,
) -> None:
    net = k8s.NetworkingV1Api(kube_api_client)
    sched = k8s.SchedulingV1Api(kube_api_client)
    ns = team.namespace
    services.team_namespace_ensure(team=team)
    assert services.drift_repair_pass(cluster=cluster).repaired == []  # nothing drifted yet

    policies = {p.metadata.name: p for p in net.list_namespaced_network_policy(ns).items}
    quota_name = core_api.list_namespaced_resource_quota(ns).items[0].metadata.name
    quota = core_api.read_namespaced_resource_quota(quota_name, ns)
    limits_name = core_api.list_namespaced_limit_range(ns).items[0].metadata.name
    want_hard = dict(quota.spec.hard)
    deleted_policy = sorted(policies)[0]
    batch_class = m.priority_class_name(wl.PRIORITY_BATCH)

    # By hand: a NetworkPolicy deleted, the quota raised and given a limit we never set, the
    # limit range emptied, the namespace's labels changed, a PriorityClass deleted.
    net.delete_namespaced_network_policy(deleted_policy, ns)
    core_api.patch_namespaced_resource_quota(
        quota_name,
        ns,
        {"spec": {"hard": {"requests.nvidia.com/gpu": "999", "count/pods": "5000"}}},
    )
    core_api.patch_namespaced_limit_range(
        limits_name, ns, {"spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}}]}}
    )
    core_api.patch_namespace(
        ns,
        {
            "metadata": {
                "labels": {
                    m.LABEL_MANAGED_BY: m.MANAGED_BY,
                    "pod-security.kubernetes.io/enforce": "privileged",
                }
            }
        },
    )
    sched.delete_priority_class(batch_class)
    try:
        result = services.drift_repair_pass(cluster=cluster)
        repaired = {(a.kind, a.name) for a in result.repaired}
        assert ("NetworkPolicy", deleted_policy) in repaired
        assert ("ResourceQuota", quota_name) in repaired
        assert ("LimitRange", limits_name) in repaired
        assert ("PriorityClass", batch_class) in repaired
        assert ("Namespace", ns) in repaired
        assert result.failed == []

        assert {p.metadata.name for p in net.list_namespaced_network_policy(ns).items} == set(
            policies
        )
        assert dict(core_api.read_namespaced_resource_quota(quota_name, ns).spec.hard) == want_hard
        limits = core_api.read_namespaced_limit_range(limits_name, ns).spec.limits
        assert not any((item.max or {}).get("cpu") == "1" for item in limits)
        assert sched.read_priority_class(batch_class).value > 0
        labels = core_api.read_namespace(ns).metadata.labels
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
        # The second pass finds nothing to do.
        assert services.drift_repair_pass(cluster=cluster).repaired == []
    finally:
        services.team_namespace_ensure(team=team)  # the shared cluster stays whole regardless
