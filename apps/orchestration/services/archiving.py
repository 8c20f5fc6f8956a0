"""Logs and events outlive a workload's objects: the end of each pod's log (per replica and
attempt) and the workload's events are archived before the objects are deleted, and purged
after LOG_ARCHIVE_RETENTION_DAYS."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.orchestration import archive, cluster_reads
from apps.orchestration.errors import (
    ClusterError,
    ClusterObjectNotFound,
    ClusterRefused,
    ClusterUnreachable,
)
from apps.orchestration.kube import (
    Kube,
)
from apps.orchestration.models import (
    WorkloadArchive,
    WorkloadLogArchive,
)
from apps.workloads.models import Workload

log = logging.getLogger(__name__)


@dataclass
class ArchiveResult:
    stored: int = 0
    problems: list[str] = field(default_factory=list)


def _store_log(
    workload: Workload, run: cluster_reads.PodRun, capped: archive.CappedLog | None, note: str
) -> None:
    """One pod's log: its own row (found again by the pod's uid, so a second pass updates it
    with the newer end), and a new pod of the same replica is the replica's next attempt."""
    now = timezone.now()
    with transaction.atomic():
        # Two workers archiving the same workload at once would give two new pods the same
        # attempt number: the workload's row lock makes them take turns.
        list(Workload.objects.select_for_update().filter(pk=workload.pk).values_list("pk"))
        row = WorkloadLogArchive.objects.filter(workload=workload, pod_uid=run.uid).first()
        if row is None:
            last = WorkloadLogArchive.objects.filter(
                workload=workload, replica=run.replica
            ).aggregate(n=Max("attempt"))["n"]
            WorkloadLogArchive.objects.create(
                workload=workload,
                replica=run.replica,
                attempt=(last or 0) + 1,
                pod_name=run.name,
                pod_uid=run.uid,
                container=run.container,
                text=capped.text if capped else "",
                bytes=capped.bytes if capped else 0,
                truncated=capped.truncated if capped else False,
                note=note[:500],
                archived_at=now,
            )
        elif capped is not None:
            # The cluster's newer reading replaces the older one; a failed one keeps it.
            WorkloadLogArchive.objects.filter(pk=row.pk).update(
                text=capped.text,
                bytes=capped.bytes,
                truncated=capped.truncated,
                note="",
                archived_at=now,
            )


def archive_runs(
    kube: Kube, workload: Workload, runs: Iterable[cluster_reads.PodRun], *, once: bool = False
) -> ArchiveResult:
    """Archive each pod's log. ``once``: a log the cluster cannot give is recorded as missing
    (with why) rather than reported, so that a pod on a lost node is not asked again on
    every pass; the archive before the delete still tries it again."""
    result = ArchiveResult()
    cap = settings.LOG_ARCHIVE_MAX_BYTES_PER_REPLICA
    asked = archive.lines_for_cap(cap)
    for run in runs:
        note = ""
        capped: archive.CappedLog | None
        try:
            capped = archive.keep_tail(
                cluster_reads.pod_run_log(workload, run, tail_lines=asked, kube=kube),
                max_bytes=cap,
                asked_lines=asked,
            )
        except ClusterObjectNotFound:
            continue  # the pod went between the list and the read: nothing left to keep
        except ClusterRefused as exc:
            # The container never started (image not pulled, …): no log, and the reason why.
            capped, note = None, f"no log: {exc.message}"
        except ClusterUnreachable as exc:
            if not once:
                result.problems.append(f"{run.name}: {exc}")
                continue
            capped, note = None, f"log unavailable: {exc}"
        _store_log(workload, run, capped, note)
        result.stored += 1
    return result


def _event_record(event: cluster_reads.ClusterEvent) -> dict[str, Any]:
    return {
        "time": event.time.isoformat() if event.time else None,
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "object": event.object,
        "count": event.count,
    }


def _store_events(workload: Workload, events: list[cluster_reads.ClusterEvent]) -> None:
    with transaction.atomic():
        if not events and not WorkloadArchive.objects.filter(workload=workload).exists():
            return
        # The watch and the reconcile pass may archive the same ending at once: the row is
        # created ON CONFLICT DO NOTHING, then its lock makes them take turns.
        WorkloadArchive.objects.bulk_create(
            [WorkloadArchive(workload=workload)], ignore_conflicts=True
        )
        row = WorkloadArchive.objects.select_for_update().get(workload=workload)
        row.events = archive.merge_events(row.events or [], [_event_record(e) for e in events])
        row.archived_at = timezone.now()
        row.save(update_fields=["events", "archived_at"])


def workload_archive(*, workload: Workload, kube: Kube) -> ArchiveResult:
    """Keep the end of every pod's log (per replica and attempt, capped) and the workload's
    Kubernetes events. Idempotent: a second pass updates what the first one stored.

    Raises :class:`ClusterUnreachable` when the pods cannot be listed; a log or the events
    that cannot be read are in ``problems``, the rest is stored.
    """
    pods = cluster_reads.workload_pods(workload, kube=kube)
    result = archive_runs(kube, workload, cluster_reads.pod_runs(pods))
    try:
        events = cluster_reads.workload_events(workload=workload, kube=kube, pods=pods)
    except ClusterError as exc:
        result.problems.append(f"events: {exc}")
    else:
        _store_events(workload, events)
    return result


def archive_before_delete(kube: Kube, workload: Workload) -> bool:
    """Archive, and say whether the objects may be deleted now: yes when everything was kept,
    or when the cluster has not given the logs for LOG_ARCHIVE_RETRY_SECONDS (then the archive
    notes why they are missing); otherwise the delete waits for the next pass."""
    unreachable: ClusterUnreachable | None = None
    try:
        result = workload_archive(workload=workload, kube=kube)
    except ClusterUnreachable as exc:
        result, unreachable = ArchiveResult(problems=[str(exc)]), exc
    problems = result.problems
    if not problems:
        done = WorkloadArchive.objects.filter(workload=workload)
        done.exclude(failing_since=None).update(failing_since=None)
        if result.stored:
            done.exclude(note="").update(note="")  # the logs came after all
        return True
    now = timezone.now()
    row, _ = WorkloadArchive.objects.get_or_create(workload=workload)
    if row.failing_since is None:
        row.failing_since = now
        row.save(update_fields=["failing_since"])
    if now - row.failing_since < timedelta(seconds=settings.LOG_ARCHIVE_RETRY_SECONDS):
        log.warning("workload %s: logs not archived yet, delete waits: %s", workload.pk, problems)
        if unreachable is not None:
            raise unreachable
        return False
    # Waited long enough: the objects go, and the archive says why the logs are missing.
    row.note = f"logs could not be archived: {'; '.join(problems)}"[:500]
    row.failing_since = None
    row.save(update_fields=["note", "failing_since"])
    return True


def archive_lost_pods(kube: Kube, workload: Workload, pods: list[dict[str, Any]]) -> None:
    """Pods being deleted or disrupted while the workload lives on (a preemption, a lost
    node): keep their logs now, before the next attempt's pod replaces them."""
    lost = [run for run in cluster_reads.pod_runs(pods) if run.lost]
    if not lost:
        return
    kept = set(
        WorkloadLogArchive.objects.filter(
            workload=workload, pod_uid__in=[r.uid for r in lost]
        ).values_list("pod_uid", flat=True)
    )
    try:
        archive_runs(kube, workload, [r for r in lost if r.uid not in kept], once=True)
    except ClusterError as exc:
        log.warning("workload %s: logs of lost pods not archived: %s", workload.pk, exc)


def archive_orphan_pods(kube: Kube, workload_id: int) -> None:
    """Before orphans go: the pods of a workload that still exists (its objects were never
    recorded, or it runs on another cluster now) are archived as they are, once."""
    workload = Workload.objects.select_related("team").filter(pk=workload_id).first()
    if workload is None:
        return
    try:
        archive_runs(kube, workload, cluster_reads.workload_pod_runs(workload, kube=kube))
    except ClusterError as exc:
        log.warning("workload %s: logs of orphaned pods not archived: %s", workload_id, exc)


def log_archive_purge(*, now: datetime | None = None) -> int:
    """Delete archived logs and events older than LOG_ARCHIVE_RETENTION_DAYS; returns how
    many rows went."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.LOG_ARCHIVE_RETENTION_DAYS)
    logs, _ = WorkloadLogArchive.objects.filter(archived_at__lt=cutoff).delete()
    # A workload whose delete still waits for its logs keeps its row (and its clock).
    events, _ = WorkloadArchive.objects.filter(
        archived_at__lt=cutoff, failing_since__isnull=True
    ).delete()
    return logs + events
