"""An endpoint's pods are replicas of their own for logs: numbered by age."""

from __future__ import annotations

from typing import Any

from apps.orchestration import cluster_reads


def pod(name: str, created: str, owner: str = "ReplicaSet") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "ownerReferences": [{"kind": owner, "name": "wl-7-abc"}],
        },
        "spec": {"containers": [{"name": "server"}]},
        "status": {},
    }


def test_each_pod_of_a_deployment_is_a_replica_numbered_by_age() -> None:
    runs = cluster_reads.pod_runs(
        [
            pod("wl-7-abc-zz", "2026-11-30T10:02:00Z"),
            pod("wl-7-abc-aa", "2026-11-30T10:00:00Z"),
            pod("wl-7-abc-mm", "2026-11-30T10:01:00Z"),
        ]
    )
    assert [(r.replica, r.name) for r in runs] == [
        (0, "wl-7-abc-aa"),
        (1, "wl-7-abc-mm"),
        (2, "wl-7-abc-zz"),
    ]
    assert cluster_reads.replica_run(runs, 2).name == "wl-7-abc-zz"


def test_a_jobs_pods_keep_their_replica_zero_and_retries() -> None:
    runs = cluster_reads.pod_runs(
        [pod("wl-8-a", "2026-11-30T10:00:00Z", "Job"), pod("wl-8-b", "2026-11-30T10:05:00Z", "Job")]
    )
    assert [(r.replica, r.name) for r in runs] == [(0, "wl-8-a"), (0, "wl-8-b")]
