"""Pod and Job phases as workload states, with the cluster's reasons and times; and the
progress of endpoints' rolling updates."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from apps.catalog.models import Cluster
from apps.common import taskqueue
from apps.orchestration import clusters
from apps.orchestration import manifests as m
from apps.orchestration import status as st
from apps.orchestration.errors import (
    ClusterError,
)
from apps.orchestration.kube import (
    Kube,
)
from apps.orchestration.selectors import (
    GONE_STATES,
    enabled_clusters,
    placed_on,
    workload_spec,
)
from apps.orchestration.services.archiving import archive_lost_pods
from apps.orchestration.services.lost_gangs import lost_gangs_restart
from apps.orchestration.services.reconcile import gone_clean_up
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.services import (
    endpoint_rollout_observed,
    workload_event_note,
    workload_transition,
)

log = logging.getLogger(__name__)


@dataclass
class SyncResult:
    transitions: int = 0
    reasons: int = 0
    freed: int = 0
    rollouts: int = 0


def group_by_workload(objects: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    grouped: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for obj in objects:
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(m.LABEL_WORKLOAD)
        if owner and owner.isdigit():
            grouped[int(owner)].append(obj)
    return grouped


def observe(
    workload: Workload,
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    now: datetime | None = None,
) -> st.Observation:
    now = now or timezone.now()
    if workload.kind == wl.KIND_NOTEBOOK:
        return st.observe_notebook(pods=pods, now=now)
    if workload.kind == wl.KIND_INFERENCE:
        return st.observe_endpoint(
            pods=pods, replicas=workload.replicas, running=workload.state == wl.RUNNING, now=now
        )
    if workload.kind == wl.KIND_TRAINING and workload.replicas > 1:
        # Retries of a gang are whole restarts through the queue; the events remember them
        # (recorded as preemptions before retries went straight back to the queue).
        used = workload.events.filter(
            to_state__in=(wl.QUEUED, wl.PREEMPTED), reason__startswith=st.RETRY_PREFIX
        ).count()
        return st.observe_gang(
            jobs=jobs,
            pods=pods,
            replicas=workload.replicas,
            retries=workload.retries,
            retries_used=used,
            requeue=workload.requeue_on_preemption,
            now=now,
        )
    expected = 1
    if workload.kind == wl.KIND_SWEEP:
        expected = len(m.sweep_points(workload_spec(workload).sweep_grid)) or 1
    return st.observe_job_workload(
        jobs=jobs, pods=pods, expected_jobs=expected, retries=workload.retries, now=now
    )


def _retry_recorded(workload: Workload, retry: int) -> bool:
    """Whether the retry under way (its number) is among the events of the current run."""
    events = workload.events.filter(reason__startswith=f"{st.RETRY_PREFIX}{retry} of ")
    if workload.admitted_at is not None:
        events = events.filter(created_at__gte=workload.admitted_at)
    return events.exists()


def status_sync_pass(*, cluster: Cluster) -> SyncResult:
    """Turn pod and Job phases into workload states, with the cluster's reasons and times.

    Three list calls per pass (GPU nodes, and pods and Jobs with our label), whatever the
    number of workloads: gangs on a node lost for good are restarted first
    (:func:`lost_gangs_restart`). With watches running (:mod:`apps.orchestration.watch`) this
    is the slow safety net.
    """
    kube = clusters.kube_for(cluster)
    try:
        lost_gangs_restart(cluster=cluster, kube=kube)
    except ClusterError as exc:
        log.warning("cluster %s: nodes not checked: %s", cluster.name, exc)
    pods = kube.list_owned("v1", "Pod", label_selector=m.LABEL_WORKLOAD)
    jobs = kube.list_owned("batch/v1", "Job", label_selector=m.LABEL_WORKLOAD)
    return status_sync_observed(cluster=cluster, pods=pods, jobs=jobs)


def _transition_extra(workload: Workload, seen: st.Observation) -> dict[str, Any]:
    """What the move to the observed state records beside the state: the cluster's times and
    exit code, and what a preemption or a retry through the queue resets."""
    extra: dict[str, Any] = {}
    if seen.started_at and workload.started_at is None:
        extra["started_at"] = seen.started_at
    if seen.finished_at:
        extra["finished_at"] = seen.finished_at
    if seen.exit_code is not None:
        extra["exit_code"] = seen.exit_code
    if seen.state == wl.PREEMPTED:
        extra["preempted_at"] = timezone.now()  # the requeue grace counts from here
    if seen.state == wl.QUEUED:
        # A retry after a failure: placed again by the next cycles, once the objects of
        # this run are gone (the cluster stays recorded until then, for the cleanup).
        extra.update(placement={}, queue_position=None, estimated_start_at=None)
    return extra


REASON_LENGTH = Workload._meta.get_field("last_reason").max_length or 500


def _apply_observation(workload: Workload, seen: st.Observation, result: SyncResult) -> bool:
    """Record what the cluster says of one workload: a new state, a retry, or a new reason.
    Returns whether it ended now (its objects are to be archived and deleted)."""
    # Clipped as a transition clips it: the cluster's words can be longer than the column.
    said = seen.reason[:REASON_LENGTH]
    if seen.state and seen.state != workload.state:
        # One transaction each, not one for the batch: a transaction holding many
        # workloads' rows deadlocked with the scheduling cycle's (which updates waiting
        # and preempted rows in its own order) under bench/admission_bench.py.
        try:
            moved = workload_transition(
                workload=workload,
                to_state=seen.state,
                reason=seen.reason,
                expected_from=workload.state,
                extra=_transition_extra(workload, seen),
            )
        except wl.TransitionError:
            moved = False
        if moved:
            result.transitions += 1
            if seen.state in GONE_STATES:
                result.freed += 1
                return True
    elif seen.retry and not _retry_recorded(workload, seen.retry):
        # A retry the state does not show by itself (the first run failed before it was
        # seen running, or the back-off passed between two looks): recorded as an event.
        if workload_event_note(
            workload=workload,
            reason=seen.retry_reason,
            last_reason=seen.reason,
            extra={"exit_code": seen.exit_code},
        ):
            result.reasons += 1
    elif said != workload.last_reason and seen.state in (None, workload.state):
        changes: dict[str, Any] = {"last_reason": said}
        if seen.exit_code is not None and seen.exit_code != workload.exit_code:
            changes["exit_code"] = seen.exit_code
        Workload.objects.filter(pk=workload.pk, state=workload.state).update(**changes)
        result.reasons += 1
    return False


def status_sync_observed(
    *,
    cluster: Cluster,
    pods: Iterable[dict[str, Any]],
    jobs: Iterable[dict[str, Any]],
    workload_ids: Iterable[int] | None = None,
    clean_up: Callable[[list[int]], None] | None = None,
) -> SyncResult:
    """The status update from objects already read (a list, or a watch's copy): every live
    workload of the cluster, or only ``workload_ids`` (those whose objects changed).

    Every state change is committed first, and a cycle queued as soon as one of them freed
    GPUs; only then are the ended workloads' objects archived and deleted, by ``clean_up``
    (the ids; the watch hands them to workers of its own) or here, several at once
    (:func:`gone_clean_up`). A cleanup lost on the way is the reconcile pass's to finish: it
    deletes the objects of every ended workload that still records some."""
    result = SyncResult()
    gone: list[int] = []
    kube = clusters.kube_for(cluster)
    pods_of = group_by_workload(pods)
    jobs_of = group_by_workload(jobs)
    single = enabled_clusters().count() == 1
    candidates = Workload.objects.units().filter(state__in=(wl.STARTING, wl.RUNNING))
    if workload_ids is not None:
        candidates = candidates.filter(pk__in=list(workload_ids))
    candidates = candidates.select_related("team", "owner", "gpu_class", "image")
    candidates = placed_on(candidates, cluster, single=single)
    for workload in candidates:
        archive_lost_pods(kube, workload, pods_of.get(workload.pk, []))
        seen = observe(workload, jobs_of.get(workload.pk, []), pods_of.get(workload.pk, []))
        if _apply_observation(workload, seen, result):
            gone.append(workload.pk)
    if result.freed:
        # Finished, failed or preempted workloads freed GPUs: let the waiting ones in now,
        # before their objects are archived and deleted.
        taskqueue.SCHEDULING_CYCLE.send()
    if gone:
        (clean_up or gone_clean_up)(gone)
    result.rollouts = endpoint_rollouts_check(kube=kube, cluster=cluster, single=single)
    return result


def _parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None


def endpoint_rollouts_check(*, kube: Kube, cluster: Cluster, single: bool) -> int:
    """Endpoints rolling out a new revision: record the progress, mark it complete, or roll it
    back when the Deployment says its new replicas missed the progress deadline. One list
    call, and only while a rollout is in progress."""
    rolling = Workload.objects.filter(
        kind=wl.KIND_INFERENCE,
        state__in=(wl.STARTING, wl.RUNNING),
        params__endpoint__rollout__state="progressing",
    )
    rolling = placed_on(rolling, cluster, single=single)
    if not rolling.exists():
        return 0
    deployments = {
        int(owner): d
        for owner, d in (
            ((d["metadata"].get("labels") or {}).get(m.LABEL_WORKLOAD, ""), d)
            for d in kube.list_owned("apps/v1", "Deployment", label_selector=m.LABEL_WORKLOAD)
        )
        if owner.isdigit()
    }
    changed = 0
    for workload in rolling:
        endpoint = (workload.params or {}).get("endpoint") or {}
        started = _parse_time((endpoint.get("rollout") or {}).get("started_at"))
        seen = st.observe_rollout(
            deployments.get(workload.pk),
            revision=int(endpoint.get("revision") or 1),
            revision_annotation=m.ANNOTATION_REVISION,
            elapsed_seconds=(timezone.now() - started).total_seconds() if started else 0.0,
            deadline_seconds=settings.ENDPOINT_PROGRESS_DEADLINE_SECONDS,
        )
        state = {st.ROLLOUT_FAILED: "failed"}.get(seen.state, seen.state)
        if endpoint_rollout_observed(
            workload=workload,
            state=state,
            message=seen.message,
            updated=seen.updated,
            ready=seen.ready,
        ):
            changed += 1
    return changed
