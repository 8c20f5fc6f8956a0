"""Plain-data builders for scheduler tests: a small fleet like the default kubesim topology."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from apps.scheduling.data import (
    GpuClassSpec,
    NodeSpec,
    Placement,
    Quota,
    ReplicaPlacement,
    RunningWorkload,
    Snapshot,
    WaitingWorkload,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LAYOUT = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")

H100 = GpuClassSpec("H100-80GB", "whole", 81559)
A100_MIG = GpuClassSpec("A100-MIG", "mig", 81920, mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb"))
L40S = GpuClassSpec("L40S-48GB", "timeslice", 46068, timeslice_replicas=4)
A100_HAMI = GpuClassSpec("A100-HAMi", "hami", 81920, hami_split_count=10)
CLASSES = (H100, A100_MIG, L40S, A100_HAMI)


def nodes(gpu_class: GpuClassSpec, count: int, gpus: int = 8, **kw: Any) -> tuple[NodeSpec, ...]:
    prefix = gpu_class.name.split("-")[0].lower()
    return tuple(
        NodeSpec(
            name=f"{prefix}-{i}",
            cluster=kw.get("cluster", "hub"),
            gpu_class=gpu_class.name,
            gpu_count=gpus,
            cpu_milli=kw.get("cpu_milli", 192_000),
            memory_mib=kw.get("memory_mib", 2_000_000),
            mig_layout=LAYOUT if gpu_class.sharing_mode == "mig" else (),
        )
        for i in range(count)
    )


_ids = iter(range(1, 10**9))


def waiting(
    team: str = "vision",
    milli: int = 1000,
    replicas: int = 1,
    *,
    gpu_class: GpuClassSpec = H100,
    priority: str = "training",
    owner: str = "owner",
    age_s: int = 0,
    wid: int | None = None,
    **kw: Any,
) -> WaitingWorkload:
    return WaitingWorkload(
        id=wid if wid is not None else next(_ids),
        team=team,
        owner=owner,
        gpu_class=gpu_class.name,
        priority=priority,
        gpu_milli=milli,
        replicas=replicas,
        submitted_at=NOW - timedelta(seconds=age_s),
        cpu_milli=kw.get("cpu_milli", 1000),
        memory_mib=kw.get("memory_mib", 1024),
        max_runtime_seconds=kw.get("max_runtime_seconds"),
        name=kw.get("name", "job"),
    )


def running(
    team: str,
    node: str,
    gpus: tuple[int, ...],
    *,
    milli: int = 1000,
    gpu_class: GpuClassSpec = H100,
    priority: str = "training",
    borrowed: bool = False,
    ran_s: int = 3600,
    owner: str = "owner",
    wid: int | None = None,
    cluster: str = "hub",
    **kw: Any,
) -> RunningWorkload:
    per_gpu = min(milli, 1000)
    units = per_gpu if gpu_class.sharing_mode != "timeslice" else kw.get("units", 4)
    return RunningWorkload(
        id=wid if wid is not None else next(_ids),
        team=team,
        owner=owner,
        gpu_class=gpu_class.name,
        priority=priority,
        gpu_milli=milli,
        replicas=1,
        admitted_at=NOW - timedelta(seconds=ran_s),
        placement=Placement(cluster, (ReplicaPlacement(node, gpus, units),)),
        borrowed=borrowed,
        cpu_milli=kw.get("cpu_milli", 1000),
        memory_mib=kw.get("memory_mib", 1024),
        max_runtime_seconds=kw.get("max_runtime_seconds"),
        requeue_on_preemption=kw.get("requeue", True),
    )


def quota(
    team: str,
    guaranteed: int,
    limit: int,
    *,
    gpu_class: GpuClassSpec = H100,
    cap: int | None = None,
) -> Quota:
    return Quota(team, gpu_class.name, guaranteed, limit, cap)


def snapshot(**kw: Any) -> Snapshot:
    return Snapshot(
        now=kw.pop("now", NOW),
        classes=kw.pop("classes", CLASSES),
        nodes=kw.pop("nodes", nodes(H100, 1)),
        running=tuple(kw.pop("running", ())),
        waiting=tuple(kw.pop("waiting", ())),
        quotas=tuple(kw.pop("quotas", (quota("vision", 4000, 8000), quota("nlp", 4000, 8000)))),
        **kw,
    )
