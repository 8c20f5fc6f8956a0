"""The platform's Celery tasks, named once and typed by their arguments.

Code that queues work holds a :class:`TaskRef` from this registry instead of a string, so the
type checker sees every caller's arguments and an import graph shows who queues what, while the
domain apps keep importing downwards only: the module that *defines* a task binds it to its ref
(``@shared_task(name=taskqueue.WORKLOAD_RECONCILE.name)``) and the module that *queues* it only
needs this registry. ``tests/platform/test_celery.py`` checks that every ref names a registered
task whose parameters are the ref's, and that no module queues a task by a bare string.

A write made for a person (inside :func:`writes_ask_broker`, which the portal's and the API's
middleware opens for each request) that queues work asks the broker first
(:meth:`TaskRef.on_commit`, inside the write's transaction): if Redis cannot be reached,
:class:`BrokerUnreachable` rolls the write back and the portal and the API say so (503,
``broker_unreachable``) within seconds, so nothing is done that no worker would hear of. Should
the broker go down between that check and the commit, the write stands and the send only logs
its failure: the periodic passes (beat: the scheduling cycle, the reconcile pass, the notice
sweep) pick the row up once the broker is back. Background writers (the watch, the workers)
record what the cluster says whatever the broker does, and leave the catching up to the same
passes. Sending itself (:meth:`TaskRef.send`) never fails its caller.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, ParamSpec

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)

P = ParamSpec("P")


class BrokerUnreachable(RuntimeError):
    """The broker (Redis) did not answer; a write that would queue work was not done."""

    code = "broker_unreachable"


BROKER_UNREACHABLE_MESSAGE = (
    "The work queue (the platform's Redis) cannot be reached; nothing was done. Try again in "
    "a minute, or tell the platform team if it lasts."
)
# Seconds an answer from the broker is trusted, so that a burst of writes asks it once.
BROKER_CHECK_TRUSTED_SECONDS = 1.0
_broker_answered_at = -BROKER_CHECK_TRUSTED_SECONDS


# Whether writes of the current context ask the broker before they queue work.
_writes_ask_broker: ContextVar[bool] = ContextVar("writes_ask_broker", default=False)


@contextmanager
def writes_ask_broker() -> Iterator[None]:
    """Inside, a write that queues work is refused (:class:`BrokerUnreachable`) when the broker
    does not answer, instead of being done and caught up later."""
    token = _writes_ask_broker.set(True)
    try:
        yield
    finally:
        _writes_ask_broker.reset(token)


def broker_check() -> None:
    """Raises :class:`BrokerUnreachable` unless the broker answers now (one quick retry and
    CELERY_BROKER_TRANSPORT_OPTIONS' connect timeout, as a send has)."""
    global _broker_answered_at  # one float per process: when the broker last answered
    if time.monotonic() - _broker_answered_at < BROKER_CHECK_TRUSTED_SECONDS:
        return
    try:
        with current_app.connection_for_write() as connection:
            # Redis' channel pings as it opens; ping again in case it was open already.
            client = getattr(connection.default_channel, "client", None)
            if client is not None:
                client.ping()
    except Exception as exc:  # whatever the transport raises, the broker did not answer
        log.warning("the broker cannot be reached: %s", exc)
        raise BrokerUnreachable(BROKER_UNREACHABLE_MESSAGE) from exc
    _broker_answered_at = time.monotonic()


@dataclass(frozen=True)
class TaskRef(Generic[P]):
    """One Celery task: its registered name and the names of its parameters."""

    name: str
    params: tuple[str, ...] = ()

    def send(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue the task now; a broker failure is logged, never raised."""
        try:
            current_app.send_task(self.name, args=list(args), kwargs=kwargs, retry=False)
        except Exception as exc:  # any broker failure must not break the caller
            log.warning("could not queue %s%s: %s", self.name, args, exc)

    def on_commit(self, *args: P.args, **kwargs: P.kwargs) -> None:
        """Queue the task when the current transaction commits (at once outside one).

        Inside a transaction of :func:`writes_ask_broker` the broker is asked first:
        :class:`BrokerUnreachable` when it does not answer, which rolls the caller's write back
        (see the module's notes)."""
        if _writes_ask_broker.get() and transaction.get_connection().in_atomic_block:
            broker_check()
        transaction.on_commit(lambda: self.send(*args, **kwargs))


# --- the registry: every task of the platform ---------------------------------------------------

HEARTBEAT: TaskRef[[]] = TaskRef("platform.heartbeat")

SCHEDULING_CYCLE: TaskRef[[]] = TaskRef("scheduling.run_cycle")
NODE_DRAIN_PASS: TaskRef[[]] = TaskRef("scheduling.node_drain_pass")

TEAM_NAMESPACE_ENSURE: TaskRef[[int]] = TaskRef("orchestration.team_namespace_ensure", ("team_id",))
CLUSTER_SETUP: TaskRef[[int]] = TaskRef("orchestration.cluster_setup", ("cluster_id",))
WORKLOAD_RECONCILE: TaskRef[[int]] = TaskRef("orchestration.workload_reconcile", ("workload_id",))
CREDENTIAL_REMOVE: TaskRef[[str, str]] = TaskRef(
    "orchestration.credential_remove", ("namespace", "k8s_name")
)
RECONCILE_ALL: TaskRef[[]] = TaskRef("orchestration.reconcile_all")
STATUS_SYNC_ALL: TaskRef[[]] = TaskRef("orchestration.status_sync_all")
INVENTORY_SYNC_ALL: TaskRef[[]] = TaskRef("orchestration.inventory_sync_all")
TRIAL_METRICS_ALL: TaskRef[[]] = TaskRef("orchestration.trial_metrics_all")
DRIFT_REPAIR_ALL: TaskRef[[]] = TaskRef("orchestration.drift_repair_all")
LOG_ARCHIVE_PURGE: TaskRef[[]] = TaskRef("orchestration.log_archive_purge")

TELEMETRY_INGEST: TaskRef[[]] = TaskRef("telemetry.ingest")
TELEMETRY_NODE_HEALTH: TaskRef[[]] = TaskRef("telemetry.node_health")
BUDGET_SPEND_REFRESH: TaskRef[[]] = TaskRef("telemetry.budget_spend_refresh")

QUOTA_GRANT_BOUNDARIES: TaskRef[[]] = TaskRef("quotas.grant_boundaries")
RESERVATION_BOUNDARIES: TaskRef[[]] = TaskRef("reservations.boundaries")
NOTICE_DELIVER: TaskRef[[int]] = TaskRef("notifications.deliver", ("delivery_id",))
NOTICE_SWEEP: TaskRef[[]] = TaskRef("notifications.sweep")
NOTICE_DIGEST: TaskRef[[]] = TaskRef("notifications.digest")

SERVING_AUTOSCALE: TaskRef[[]] = TaskRef("serving.autoscale")
SERVING_SAMPLES_PURGE: TaskRef[[]] = TaskRef("serving.samples_purge")

REGISTRY: tuple[TaskRef, ...] = (
    HEARTBEAT,
    SCHEDULING_CYCLE,
    NODE_DRAIN_PASS,
    TEAM_NAMESPACE_ENSURE,
    CLUSTER_SETUP,
    WORKLOAD_RECONCILE,
    CREDENTIAL_REMOVE,
    RECONCILE_ALL,
    STATUS_SYNC_ALL,
    INVENTORY_SYNC_ALL,
    TRIAL_METRICS_ALL,
    DRIFT_REPAIR_ALL,
    LOG_ARCHIVE_PURGE,
    TELEMETRY_INGEST,
    TELEMETRY_NODE_HEALTH,
    BUDGET_SPEND_REFRESH,
    QUOTA_GRANT_BOUNDARIES,
    RESERVATION_BOUNDARIES,
    NOTICE_DELIVER,
    NOTICE_SWEEP,
    NOTICE_DIGEST,
    SERVING_AUTOSCALE,
    SERVING_SAMPLES_PURGE,
)
