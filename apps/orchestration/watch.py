"""Status and inventory from watch streams: one :class:`ClusterWatch` per cluster.

Three informers (our pods, our Jobs, the GPU nodes) follow the cluster in threads of their
own and queue what changed; :meth:`ClusterWatch.step`, in the caller's thread (the one
with the database connection), gathers the workloads whose objects changed and runs the
status update service for those only, from the informers' copies: no list call. Node
changes that matter to the inventory (labels, allocatable, schedulable, ready) refresh it.
The periodic list passes stay as a slow safety net (``ORCHESTRATION_STATUS_SYNC_SECONDS``).

A workload that ended frees its GPUs when its state changes; archiving its logs and deleting
its objects (a dozen API calls) is left to ``ORCHESTRATION_WATCH_CLEANUP_CONCURRENCY`` (2)
cleanup workers of the watch, so the next step (the next workload that ended or started) never
waits for them. They are few on purpose: they share the interpreter with the steps, and with
eight of them a burst of endings kept each reply PostgreSQL sent a step waiting its turn
(under load a step's state changes took 22 s at p50 with eight, 15 s with two, in
``bench/admission_bench.py``). When endings come faster than two workers clean up, the
periodic reconcile pass (Celery, ``ORCHESTRATION_RECONCILE_SECONDS``) deletes the objects of
the ended workloads as well; each cleanup is idempotent, so the two never conflict.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection

from apps.catalog.models import Cluster
from apps.catalog.resources import GPU_NODES_SELECTOR
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import kube_for
from apps.orchestration.errors import ClusterError
from apps.orchestration.informer import Informer, InformerStats, ReconnectBackoff
from apps.orchestration.kube import Kube
from apps.workloads import core as wl
from apps.workloads.models import Workload

log = logging.getLogger(__name__)

# A workload whose pods change before its own state says STARTING (the reconcile worker is
# still committing) is looked at again for this long.
RECHECK_SECONDS = 10.0


def _workload_of(obj: dict[str, Any]) -> int | None:
    owner = ((obj.get("metadata") or {}).get("labels") or {}).get(m.LABEL_WORKLOAD, "")
    return int(owner) if owner.isdigit() else None


def node_signature(node: dict[str, Any]) -> tuple[Any, ...]:
    """What of a node the inventory records (heartbeats and the like aside; the images it holds
    included: the image picker and the request rules read them)."""
    meta, status = node.get("metadata") or {}, node.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return (
        meta.get("name"),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
        tuple(sorted((status.get("allocatable") or {}).items())),
        bool((node.get("spec") or {}).get("unschedulable")),
        ready,
        tuple(
            name
            for image in status.get("images") or []
            for name in (image.get("names") or [])
            if isinstance(image, dict)
        ),
    )


@dataclass
class StepResult:
    workloads: int = 0  # workloads looked at
    transitions: int = 0
    inventory: bool = False


class ClusterWatch:
    def __init__(
        self,
        cluster: Cluster,
        *,
        kube: Kube | None = None,
        watch_seconds: int = 300,
        coalesce_seconds: float = 0.05,
        backoff: ReconnectBackoff | None = None,
        nodes: bool = True,
    ) -> None:
        self.cluster = cluster
        self.kube = kube or kube_for(cluster)
        self.coalesce_seconds = coalesce_seconds
        self._changes: queue.Queue[tuple[str, list[dict[str, Any]]]] = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._recheck: dict[int, float] = {}
        self._nodes_seen: frozenset[tuple[Any, ...]] | None = None
        self._cleaners: ThreadPoolExecutor | None = None
        self._cleaning: set[Future[None]] = set()
        self._cleaning_lock = threading.Lock()

        def informer(api_version: str, kind: str, selector: str) -> Informer:
            return Informer(
                self.kube,
                api_version,
                kind,
                label_selector=selector,
                on_change=lambda objs, _relisted: self._changes.put((kind, objs)),
                watch_seconds=watch_seconds,
                backoff=backoff,
            )

        self.pods = informer("v1", "Pod", m.LABEL_WORKLOAD)
        self.jobs = informer("batch/v1", "Job", m.LABEL_WORKLOAD)
        self.informers = [self.pods, self.jobs]
        self.nodes: Informer | None = None
        if nodes:
            self.nodes = informer("v1", "Node", GPU_NODES_SELECTOR)
            self.informers.append(self.nodes)

    # --- life -------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._threads = [i.start(self._stop) for i in self.informers]

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)  # a watch blocked on a quiet stream ends with the process
        if self._cleaners is not None:
            # Cleanups under way finish (none is cut off); those still waiting are dropped, and
            # the reconcile pass deletes what they would have (it cleans every ended workload
            # that still records objects). After a burst, thousands may wait: a stopping watch
            # must not spend minutes on them.
            self._cleaners.shutdown(wait=True, cancel_futures=True)
            self._cleaners = None

    def wait_cleaned(self, timeout: float = 60.0) -> bool:
        """Wait until the cleanups handed out so far have finished; False on timeout."""
        with self._cleaning_lock:
            pending = set(self._cleaning)
        _, not_done = futures_wait(pending, timeout=timeout)
        return not not_done

    def _clean_up(self, workload_ids: list[int]) -> None:
        """Hand the ended workloads to the cleanup workers (started on first use)."""
        if self._cleaners is None:
            self._cleaners = ThreadPoolExecutor(
                max_workers=settings.ORCHESTRATION_WATCH_CLEANUP_CONCURRENCY,
                thread_name_prefix="watch-cleanup",
            )
        for workload_id in workload_ids:
            future = self._cleaners.submit(self._clean_one, workload_id)
            with self._cleaning_lock:
                self._cleaning.add(future)
            future.add_done_callback(self._cleaned)

    def _cleaned(self, future: Future[None]) -> None:
        with self._cleaning_lock:
            self._cleaning.discard(future)

    @staticmethod
    def _clean_one(workload_id: int) -> None:
        try:
            services.gone_clean_up([workload_id])
        except Exception:  # the reconcile pass deletes what is left
            log.exception("workload %s: cleanup failed", workload_id)
        finally:
            connection.close()  # this worker thread's own connection

    def wait_synced(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        return all(i.synced.wait(max(0.0, deadline - time.monotonic())) for i in self.informers)

    def stats(self) -> dict[str, InformerStats]:
        return {i.kind: i.stats for i in self.informers}

    # --- work -------------------------------------------------------------------------------

    def _drain(self, timeout: float) -> list[tuple[str, list[dict[str, Any]]]]:
        try:
            batch = [self._changes.get(timeout=timeout)]
        except queue.Empty:
            return []
        deadline = time.monotonic() + self.coalesce_seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                batch.append(self._changes.get(timeout=left))
            except queue.Empty:
                break
        while True:
            try:
                batch.append(self._changes.get_nowait())
            except queue.Empty:
                return batch

    def step(self, timeout: float = 1.0) -> StepResult:
        """Wait up to ``timeout`` for changes, then bring the database up to them."""
        result = StepResult()
        batch = self._drain(timeout)
        ids: set[int] = set()
        nodes_changed = False
        for kind, objects in batch:
            if kind == "Node":
                nodes_changed = True
                continue
            ids.update(i for obj in objects if (i := _workload_of(obj)) is not None)
        now = time.monotonic()
        ids.update(i for i, until in self._recheck.items() if until > now)
        self._recheck = {i: until for i, until in self._recheck.items() if until > now}
        if ids:
            result.workloads = len(ids)
            pods = [p for p in self.pods.objects() if _workload_of(p) in ids]
            jobs = [j for j in self.jobs.objects() if _workload_of(j) in ids]
            synced = services.status_sync_observed(
                cluster=self.cluster,
                pods=pods,
                jobs=jobs,
                workload_ids=ids,
                clean_up=self._clean_up,
            )
            result.transitions = synced.transitions
            # Objects ahead of the workload's own state: look again shortly.
            for pk in Workload.objects.filter(pk__in=ids, state=wl.ADMITTED).values_list(
                "pk", flat=True
            ):
                self._recheck.setdefault(pk, now + RECHECK_SECONDS)
        if nodes_changed and self.nodes is not None:
            nodes = self.nodes.objects()
            seen = frozenset(node_signature(n) for n in nodes)
            if seen != self._nodes_seen:
                services.cluster_inventory_store(cluster=self.cluster, nodes=nodes)
                self._nodes_seen = seen
                result.inventory = True
        return result


def run_watches(
    stop: threading.Event,
    *,
    clusters: list[Cluster],
    watch_seconds: int = 300,
    on_step: Callable[[Cluster, StepResult], None] | None = None,
) -> None:
    """Follow every cluster until ``stop``; the database work is done in this thread."""
    watches = [ClusterWatch(c, watch_seconds=watch_seconds) for c in clusters]
    for watch in watches:
        watch.start()
    wait = 1.0 / max(1, len(watches))
    try:
        while not stop.is_set():
            for watch in watches:
                try:
                    result = watch.step(timeout=wait)
                except ClusterError as exc:
                    # The safety net's next pass covers what this step could not do.
                    log.warning("cluster %s: %s", watch.cluster.name, exc)
                    continue
                except DatabaseError as exc:
                    log.warning("cluster %s: database: %s", watch.cluster.name, exc)
                    close_old_connections()
                    stop.wait(1.0)
                    continue
                if on_step is not None:
                    on_step(watch.cluster, result)
    finally:
        for watch in watches:
            watch.stop()
