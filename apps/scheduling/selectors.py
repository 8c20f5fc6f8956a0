"""Reads for the scheduler: the snapshot a cycle decides on."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.selectors import node_blockers
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import grant_specs
from apps.reservations import core as reservations_core
from apps.reservations.models import Reservation
from apps.reservations.selectors import active_bookings
from apps.scheduling.burst import BurstTerms, may_burst
from apps.scheduling.data import (
    GpuClassSpec,
    NodeSpec,
    Placement,
    PreemptedWorkload,
    Quota,
    ReplicaPlacement,
    RunningWorkload,
    Snapshot,
    TopologyAsk,
    WaitingWorkload,
)
from apps.scheduling.fairshare import UsageInterval, decayed_member_usage, decayed_usage
from apps.workloads import core as workload_core
from apps.workloads.models import Workload

# How a workload moved off a drained node is told; it goes back to the queue after its grace.
DRAIN_PREFIX = "Node drain:"
# Past usage older than this many half-lives weighs under 2%: not worth reading.
HISTORY_HALF_LIVES = 6


def class_spec(gpu_class: GpuClass) -> GpuClassSpec:
    return gpu_class.spec()


def node_specs(gpu_class: GpuClass | None = None, *, now: datetime | None = None) -> list[NodeSpec]:
    """GPU nodes of enabled clusters that take new work, as the scheduler sees them: not
    cordoned, Ready, health check not failed, not in maintenance
    (:func:`apps.catalog.selectors.node_blockers` says why a node is left out)."""
    qs = ClusterNode.objects.filter(
        cluster__enabled=True, gpu_class__isnull=False, schedulable=True, ready=True
    ).select_related("cluster", "gpu_class")
    if gpu_class is not None:
        qs = qs.filter(gpu_class=gpu_class)
    nodes = list(qs.order_by("cluster__name", "name"))
    blocked = node_blockers(nodes, now=now or timezone.now())
    return [
        NodeSpec(
            name=n.name,
            cluster=n.cluster.name,
            gpu_class=n.gpu_class.name if n.gpu_class else "",
            gpu_count=n.gpu_count,
            cpu_milli=n.cpu_milli,
            memory_mib=n.memory_mib,
            mig_layout=tuple(n.mig_layout or ()),
            gpu_uuids=tuple(n.gpu_uuids or ()),
            down_gpus=_down_gpus(n),
            topology=_topology(n),
        )
        for n in nodes
        if n.pk not in blocked
    ]


def _topology(node: ClusterNode) -> tuple[tuple[str, str], ...]:
    """The node's domain at each configured level (SCHEDULING_TOPOLOGY_LEVELS, widest first),
    read from its labels; empty when it has none of them."""
    labels = node.labels or {}
    path = tuple(
        (level, str(labels.get(label) or ""))
        for level, label in settings.SCHEDULING_TOPOLOGY_LEVELS
    )
    return path if any(domain for _level, domain in path) else ()


def topology_ask(params: Any) -> TopologyAsk | None:
    """A workload's recorded topology ask (``params["topology"]``), None when it made none."""
    ask = params.get("topology") if isinstance(params, dict) else None
    if not isinstance(ask, dict) or not ask.get("level"):
        return None
    return TopologyAsk(level=str(ask["level"]), required=bool(ask.get("required")))


def _down_gpus(node: ClusterNode) -> tuple[int, ...]:
    """The indices of the node's GPUs that failed their health check."""
    down = set()
    for fault in node.gpu_faults or ():
        try:
            down.add(int(fault["index"]))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(sorted(down))


def quota_spec(quota: TeamQuota) -> Quota:
    return Quota(
        team=quota.team.name,
        gpu_class=quota.gpu_class.name,
        guaranteed_milli=quota.guaranteed_milli,
        limit_milli=quota.limit_milli,
        per_user_cap_milli=quota.per_user_cap_milli,
    )


def placement_from_json(data: Any) -> Placement | None:
    """The stored placement (see :func:`placement_to_json`), or None if absent or malformed."""
    if not isinstance(data, dict) or not isinstance(data.get("replicas"), list):
        return None
    try:
        replicas = tuple(
            ReplicaPlacement(
                node=str(r["node"]),
                gpus=tuple(int(g) for g in r.get("gpus", [])),
                units=int(r.get("units", 0)),
                mig_profile=r.get("mig_profile"),
                mig_slot=r.get("mig_slot"),
            )
            for r in data["replicas"]
        )
    except (KeyError, TypeError, ValueError):
        return None
    return Placement(cluster=str(data.get("cluster", "")), replicas=replicas)


def placement_to_json(
    placement: Placement,
    *,
    gpu_uuids: dict[tuple[str, str], tuple[str, ...]],
    allocation: str | None = None,
) -> dict[str, Any]:
    """The placement orchestration reads: per replica the node, GPU indices and UUIDs, and
    (``allocation``) how the class allocated GPUs when it was admitted (device plugin or DRA):
    the workload keeps that way even if an admin switches the class while it runs."""
    replicas = []
    for r in placement.replicas:
        uuids = gpu_uuids.get((placement.cluster, r.node), ())
        replicas.append(
            {
                "node": r.node,
                "gpus": list(r.gpus),
                "gpu_uuids": [uuids[g] for g in r.gpus if g < len(uuids)],
                "units": r.units,
                "mig_profile": r.mig_profile,
                "mig_slot": r.mig_slot,
            }
        )
    stored: dict[str, Any] = {"cluster": placement.cluster, "replicas": replicas}
    if allocation:
        stored["allocation"] = allocation
    return stored


def _running(w: Workload, now: datetime) -> RunningWorkload:
    return RunningWorkload(
        id=w.pk,
        team=w.team.name,
        owner=w.owner.get_username(),
        gpu_class=w.gpu_class.name,
        priority=w.priority_class,
        gpu_milli=w.gpu_milli,
        charged_milli=w.charged_milli,
        replicas=w.replicas,
        admitted_at=w.admitted_at or w.created_at or now,
        placement=placement_from_json(w.placement),
        borrowed=w.borrowed,
        cpu_milli=w.cpu_milli,
        memory_mib=w.memory_mib,
        max_runtime_seconds=w.max_runtime_seconds,
        name=w.name,
        requeue_on_preemption=w.requeue_on_preemption,
        sweep=w.sweep_id,
        checkpoint_at=w.checkpoint_at,
        checkpoint_step=w.checkpoint_step,
    )


def _waiting(w: Workload) -> WaitingWorkload:
    return WaitingWorkload(
        id=w.pk,
        team=w.team.name,
        owner=w.owner.get_username(),
        gpu_class=w.gpu_class.name,
        priority=w.priority_class,
        gpu_milli=w.gpu_milli,
        charged_milli=w.charged_milli,
        replicas=w.replicas,
        submitted_at=w.queued_at or w.created_at,
        cpu_milli=w.cpu_milli,
        memory_mib=w.memory_mib,
        max_runtime_seconds=w.max_runtime_seconds,
        name=w.name,
        sweep=w.sweep_id,
        topology=topology_ask(w.params),
    )


# An endpoint's replicas beyond those it holds wait in the queue as one-replica requests of
# their own, under ids no stored workload has: -(endpoint id × SCALE_UP_STRIDE + k + 1).
SCALE_UP_STRIDE = 100


def scale_up_id(endpoint_id: int, k: int) -> int:
    return -(endpoint_id * SCALE_UP_STRIDE + k + 1)


def scale_up_endpoint(waiting_id: int) -> int | None:
    """The endpoint a scale-up's id stands for (None: a stored workload's id, or a preview)."""
    if waiting_id > -SCALE_UP_STRIDE:
        return None
    return (-waiting_id - 1) // SCALE_UP_STRIDE


def endpoint_target(params: Any) -> int:
    """The replicas an endpoint is asked to run (by its owner or its scaling loop)."""
    endpoint = params.get("endpoint") if isinstance(params, dict) else None
    value = endpoint.get("target_replicas") if isinstance(endpoint, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _scale_ups(endpoints: Any) -> list[WaitingWorkload]:
    """One waiting request per replica a running endpoint is asked for and does not hold."""
    out: list[WaitingWorkload] = []
    for w in endpoints:
        missing = min(endpoint_target(w.params) - w.replicas, SCALE_UP_STRIDE - 1)
        asked = (w.params.get("endpoint") or {}).get("scale_requested_at")
        since = w.admitted_at or w.created_at
        if isinstance(asked, str):
            with suppress(ValueError):
                since = datetime.fromisoformat(asked)
        out.extend(
            replace(
                _waiting(w),
                id=scale_up_id(w.pk, k),
                replicas=1,
                submitted_at=since,
                name=f"{w.name} (replica {w.replicas + k + 1})",
            )
            for k in range(max(0, missing))
        )
    return out


def past_usage(*, now: datetime, half_life_seconds: int) -> dict[tuple[str, str], float]:
    """Decayed average allocation per (team, class) over the recent past."""
    intervals = usage_intervals(now=now, half_life_seconds=half_life_seconds)
    return decayed_usage(intervals, now=now, half_life_seconds=half_life_seconds)


def usage_intervals(*, now: datetime, half_life_seconds: int) -> list[UsageInterval]:
    """Who held what, when, over the recent past: the intervals decayed usage is made of."""
    since = now - timedelta(seconds=half_life_seconds * HISTORY_HALF_LIVES)
    rows = (
        Workload.objects.units()
        .filter(admitted_at__isnull=False)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
        .values_list(
            "team__name",
            "gpu_class__name",
            "charged_milli",
            "replicas",
            "admitted_at",
            "finished_at",
            "preempted_at",
            "state",
            "owner__username",
        )
    )
    intervals = []
    for team, gpu_class, milli, replicas, admitted, finished, preempted, state, owner in rows:
        if admitted is None:
            continue
        if state in workload_core.ACTIVE_STATES:
            end = None
        elif finished is not None:
            end = finished
        elif preempted is not None and preempted >= admitted:
            end = preempted
        else:
            continue  # waiting again, never ran since: nothing to count
        intervals.append(
            UsageInterval(team, gpu_class, milli * replicas, admitted, end, owner=owner)
        )
    return intervals


def burst_terms() -> BurstTerms:
    """Burst clusters (enabled, with their prices), the teams that may burst, and the waits."""
    clusters = dict(
        Cluster.objects.filter(enabled=True, role=Cluster.Role.BURST).values_list(
            "name", "gpu_hourly_cost"
        )
    )
    capacity: dict[str, set[str]] = {}
    for class_name, cluster in ClusterNode.objects.filter(
        cluster__name__in=list(clusters), gpu_class__isnull=False, gpu_count__gt=0
    ).values_list("gpu_class__name", "cluster__name"):
        capacity.setdefault(class_name, set()).add(cluster)
    return BurstTerms(
        clusters=clusters,
        class_prices=dict(GpuClass.objects.values_list("name", "hourly_cost")),
        teams=frozenset(Team.objects.filter(allow_burst=True).values_list("name", flat=True)),
        waits=dict(settings.SCHEDULING_BURST_WAIT_SECONDS),
        capacity={c: frozenset(names) for c, names in capacity.items()},
    )


def team_runs_preemptible(team: Team, gpu_class: GpuClass, priority: str) -> bool:
    """Whether the team runs anything on the class that a request of ``priority`` may
    preempt within the team (a strictly lower class, never production; DESIGN.md). Without
    such work no submission of the team can stop a teammate's: one indexed query, where the
    scheduler's dry run reads every live workload."""
    lower = [p for p in workload_core.PRIORITY_ORDER if workload_core.may_preempt(priority, p)]
    if not lower:
        return False
    return (
        Workload.objects.units()
        .filter(
            team=team,
            gpu_class=gpu_class,
            state__in=workload_core.ACTIVE_STATES,
            priority_class__in=lower,
        )
        .exists()
    )


def scheduling_snapshot(
    *, now: datetime, half_life_seconds: int, burst: BurstTerms | None = None
) -> Snapshot:
    """Everything one cycle decides on, read in a handful of queries.

    Sweeps themselves hold no GPUs: their trials are the units (each with its sweep's id, and
    the sweep's parallelism cap in ``parallelism``)."""
    related = ("team", "owner", "gpu_class")
    units = Workload.objects.units()
    running = [
        _running(w, now)
        for w in units.filter(state__in=workload_core.ACTIVE_STATES)
        .select_related(*related)
        .order_by("id")
    ]
    waiting = [
        _waiting(w)
        for w in units.filter(state__in=workload_core.WAITING_STATES)
        # Back in the queue while its previous run's objects are still being removed (a retry
        # after a failure goes straight back, its cluster recorded for the cleanup): admitted
        # again only once they are gone, so that no new run finds the old Job in its place.
        .exclude(Q(state=workload_core.QUEUED, cluster__isnull=False) & ~Q(k8s_objects=[]))
        .select_related(*related)
        .order_by("id")
    ]
    waiting.extend(
        _scale_ups(
            units.filter(kind=workload_core.KIND_INFERENCE, state__in=workload_core.ACTIVE_STATES)
            .select_related(*related)
            .order_by("id")
        )
    )
    preempted = [
        PreemptedWorkload(
            id=w.pk,
            preempted_at=w.preempted_at or now,
            # Moved off a drained node: back to the queue whatever was chosen for preemption.
            requeue=w.requeue_on_preemption or (w.last_reason or "").startswith(DRAIN_PREFIX),
            priority=w.priority_class,
            sweep=w.sweep_id,
            # Until it leaves this state its pods may still terminate where it ran: what it
            # held stays held (core._Cycle._hold), for the workload it was preempted for.
            held=held if (held := _running(w, now)).placement is not None else None,
        )
        for w in units.filter(state=workload_core.PREEMPTED).select_related(*related).order_by("id")
    ]
    sweeps = {w.sweep for w in waiting if w.sweep is not None}
    parallelism = {
        pk: _parallelism(params)
        for pk, params in Workload.objects.filter(pk__in=sweeps).values_list("id", "params")
    }
    history = usage_intervals(now=now, half_life_seconds=half_life_seconds)
    return Snapshot(
        now=now,
        classes=tuple(class_spec(c) for c in GpuClass.objects.order_by("name")),
        nodes=tuple(node_specs(now=now)),
        running=tuple(running),
        waiting=tuple(waiting),
        quotas=tuple(
            quota_spec(q)
            for q in TeamQuota.objects.select_related("team", "gpu_class").order_by("id")
        ),
        past_usage_milli=decayed_usage(history, now=now, half_life_seconds=half_life_seconds),
        member_past_usage_milli=decayed_member_usage(
            history, now=now, half_life_seconds=half_life_seconds
        ),
        preempted=tuple(preempted),
        parallelism=parallelism,
        grants=tuple(grant_specs(now=now)),
        reservations=tuple(active_bookings(now=now)),
        burst_clusters=frozenset(burst.clusters) if burst else frozenset(),
        may_burst=frozenset(may_burst(tuple(waiting), burst, now)) if burst else frozenset(),
    )


def _parallelism(params: Any) -> int:
    """A sweep's recorded cap (the rules fixed it at submit); a malformed one: one at a time."""
    value = (params or {}).get("parallelism") if isinstance(params, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return 1


# --- reserved capacity and its use (hoarding made visible) ------------------------------------


@dataclass(frozen=True)
class ReservationUse:
    reservation: Reservation
    use: reservations_core.Use


def reservation_uses(reservations: Iterable[Reservation], *, now: datetime) -> list[ReservationUse]:
    """For each booking: the GPU-hours held so far and how many of them its team used (its
    admitted and running workloads of the class in the window, up to the amount reserved)."""
    out = []
    for r in reservations:
        end = min(r.ends_at, now)
        intervals: list[reservations_core.Interval] = []
        if end > r.starts_at:
            rows = (
                Workload.objects.units()
                .filter(
                    team_id=r.team_id,
                    gpu_class_id=r.gpu_class_id,
                    admitted_at__isnull=False,
                    admitted_at__lt=end,
                )
                .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=r.starts_at))
                .values_list(
                    "charged_milli",
                    "replicas",
                    "admitted_at",
                    "finished_at",
                    "preempted_at",
                    "state",
                )
            )
            for milli, replicas, admitted, finished, preempted, state in rows:
                if admitted is None:
                    continue
                if state in workload_core.ACTIVE_STATES:
                    stop = None
                elif finished is not None:
                    stop = finished
                elif preempted is not None and preempted >= admitted:
                    stop = preempted
                else:
                    continue
                intervals.append(reservations_core.Interval(milli * replicas, admitted, stop))
        out.append(
            ReservationUse(r, reservations_core.reservation_use(r.booking(), intervals, now=now))
        )
    return out
