"""The reconcile pass over a cluster: live workloads have their objects, the others have
none, orphans go; and the cleanup of ended workloads, several at a time."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet

from apps.catalog.models import Cluster
from apps.orchestration import clusters
from apps.orchestration import manifests as m
from apps.orchestration.errors import (
    ClusterError,
    ClusterRefused,
    ClusterUnreachable,
)
from apps.orchestration.kube import (
    Kube,
)
from apps.orchestration.selectors import (
    GONE_STATES,
    LIVE_STATES,
    placed_on,
)
from apps.orchestration.services.archiving import archive_orphan_pods
from apps.orchestration.services.objects import WORKLOAD_KINDS, workload_reconcile
from apps.workloads import core as wl
from apps.workloads.models import Workload

log = logging.getLogger(__name__)


@dataclass
class ReconcileResult:
    created: int = 0
    deleted: int = 0
    orphans_deleted: int = 0
    endpoints_checked: int = 0
    unreachable: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _labelled_objects(kube: Kube, version: str, kind: str) -> list[dict[str, Any]]:
    """Objects of a kind carrying a workload label: one cluster-wide list call, except for
    Secrets, which are listed in team namespaces only (the portal's role may read no other
    namespace's Secrets): one call for the namespaces, then one per team namespace."""
    if kind != "Secret":
        return kube.list_owned(version, kind, label_selector=m.LABEL_WORKLOAD)
    found: list[dict[str, Any]] = []
    for ns in kube.list_owned("v1", "Namespace"):
        if ns["metadata"].get("deletionTimestamp"):
            continue  # going away, its binding perhaps already gone: nothing to sweep
        namespace = ns["metadata"]["name"]
        try:
            found.extend(
                kube.list_owned(version, kind, namespace=namespace, label_selector=m.LABEL_WORKLOAD)
            )
        except ClusterRefused as exc:
            if exc.status != 403:
                raise
            # The namespace lacks the portal's RoleBinding (the next team pass restores it):
            # the other namespaces are still swept.
            log.warning("orphan sweep skips %s: %s", namespace, exc)
    return found


def _reconcile_one(workload_id: int) -> str | Exception:
    try:
        return workload_reconcile(workload_id=workload_id)
    except (ClusterError, ValueError) as exc:
        return exc


def reconcile_many(
    todo: list[tuple[int, str]],
) -> Iterator[tuple[int, str, str | Exception]]:
    """``workload_reconcile`` for each, ORCHESTRATION_RECONCILE_CONCURRENCY at a time.

    Each is idempotent and safe to run concurrently (object names come from the workload
    id; a second create is a 409 on our own object), so a worker killed at any point leaves
    at most one object per name, and the next pass finishes its work. Inside a transaction
    (the caller's rows are not visible to other connections) they run one after the other.
    The first unreachable cluster stops the pass: what was not started waits for the next.
    """
    workers = settings.ORCHESTRATION_RECONCILE_CONCURRENCY
    if workers <= 1 or len(todo) <= 1 or connection.in_atomic_block:
        for workload_id, counter in todo:
            outcome = _reconcile_one(workload_id)
            yield workload_id, counter, outcome
            if isinstance(outcome, ClusterUnreachable):
                return
        return

    def run(workload_id: int) -> str | Exception:
        try:
            return _reconcile_one(workload_id)
        finally:
            connection.close()  # this thread's own connection

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reconcile") as pool:
        futures = [(pk, counter, pool.submit(run, pk)) for pk, counter in todo]
        for workload_id, counter, future in futures:
            outcome = future.result()
            yield workload_id, counter, outcome
            if isinstance(outcome, ClusterUnreachable):
                for _, _, rest in futures:
                    rest.cancel()
                return


Listed = list[tuple[str, str, dict[str, Any], str]]  # apiVersion, kind, metadata, owner id


def _listed_objects(kube: Kube) -> Listed:
    """Every object of the workload kinds carrying a workload label: one list call a kind."""
    listed: Listed = []
    for version, kind in WORKLOAD_KINDS:
        for obj in _labelled_objects(kube, version, kind):
            owner = (obj["metadata"].get("labels") or {}).get(m.LABEL_WORKLOAD, "")
            listed.append((version, kind, obj["metadata"], owner))
    return listed


def _reconcile_todo(on_cluster: QuerySet[Workload], listed: Listed) -> list[tuple[int, str]]:
    """The workloads that need a reconcile, each with the counter its outcome adds to."""
    existing = {(kind, meta.get("namespace") or "", meta["name"]) for _, kind, meta, _ in listed}
    todo: list[tuple[int, str]] = []
    for pk, state, refs, kind in on_cluster.filter(state__in=LIVE_STATES).values_list(
        "pk", "state", "k8s_objects", "kind"
    ):
        present = bool(refs) and all(
            (r["kind"], r["namespace"], r["name"]) in existing for r in refs
        )
        # An endpoint's objects change while it runs (replicas, revisions): applied again on
        # every pass, so a lost reconcile task is made good (unchanged objects cost a read).
        if state == wl.ADMITTED or not present:
            todo.append((pk, "created"))
        elif kind == wl.KIND_INFERENCE:
            todo.append((pk, "endpoints_checked"))
    stale = on_cluster.filter(state__in=GONE_STATES).exclude(k8s_objects=[])
    todo.extend((pk, "deleted") for pk in stale.values_list("pk", flat=True))
    return todo


def _delete_orphans(
    kube: Kube, listed: Listed, *, keep: set[str], handled: set[str], result: ReconcileResult
) -> None:
    """Objects with our label whose workload is not in ``keep`` (live here, or its logs still
    being archived) go, after the pods of a workload that still exists are archived."""
    for version, kind, meta, owner in listed:
        if not owner or owner in keep or not owner.isdigit():
            continue
        if owner not in handled:
            handled.add(owner)
            archive_orphan_pods(kube, int(owner))
        try:
            if kube.delete(
                version, kind, meta["name"], meta.get("namespace"), workload_id=int(owner)
            ):
                result.orphans_deleted += 1
        except ClusterUnreachable as exc:
            result.unreachable.append(str(exc))
            return
        except ClusterError as exc:
            # One object the server will not delete does not keep the others.
            result.errors.append(f"{kind} {meta.get('namespace')}/{meta['name']}: {exc}")


def reconcile_pass(*, cluster: Cluster) -> ReconcileResult:
    """One pass over a cluster: live workloads have objects, others have none, orphans go.

    One list call per kind of object, whatever the number of workloads; only workloads whose
    objects are missing (or that were just admitted) cost further API calls.
    """
    result = ReconcileResult()
    kube = clusters.kube_for(cluster)
    try:
        listed = _listed_objects(kube)
    except ClusterUnreachable as exc:
        result.unreachable.append(str(exc))
        return result
    # A sweep has no objects of its own; its trials do.
    on_cluster = placed_on(Workload.objects.units(), cluster)
    todo = _reconcile_todo(on_cluster, listed)
    handled: set[str] = {str(pk) for pk, _ in todo}
    waiting: set[str] = set()
    for workload_id, counter, outcome in reconcile_many(todo):
        if isinstance(outcome, ClusterUnreachable):
            result.unreachable.append(str(outcome))
            return result
        if isinstance(outcome, ClusterError | ValueError):
            # A record that cannot be reconciled is reported; the pass goes on for the others.
            log.warning("workload %s: %s", workload_id, outcome)
            result.errors.append(f"workload {workload_id}: {outcome}")
            continue
        if outcome in ("ensured", "deleted"):
            setattr(result, counter, getattr(result, counter) + 1)
        elif outcome == "archiving":
            waiting.add(str(workload_id))
    # Orphans: objects with our label whose workload is not live here (finished, gone, or
    # admitted to another cluster since). Those whose logs are still being archived wait.
    live_ids = {
        str(pk) for pk in on_cluster.filter(state__in=LIVE_STATES).values_list("pk", flat=True)
    }
    _delete_orphans(kube, listed, keep=live_ids | waiting, handled=handled, result=result)
    return result


def gone_clean_up(workload_ids: list[int]) -> int:
    """Archive and delete the objects of ended workloads, ORCHESTRATION_RECONCILE_CONCURRENCY
    at a time (each one idempotent, see :func:`workload_reconcile`); returns how many were
    deleted. One that fails is logged and left to the reconcile pass."""
    deleted = 0
    for workload_id, _, outcome in reconcile_many([(pk, "deleted") for pk in workload_ids]):
        if isinstance(outcome, Exception):
            log.warning("workload %s: objects not deleted yet: %s", workload_id, outcome)
        elif outcome == "deleted":
            deleted += 1
    return deleted
