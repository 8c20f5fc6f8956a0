"""Hand-off of the scheduler's decisions to orchestration, after they are committed.

Orchestration subscribes once, e.g. in its AppConfig.ready()::

    from apps.scheduling.handoff import subscribe
    subscribe(my_receiver)   # my_receiver(decisions: Decisions) -> None

``decisions_hand_off`` runs from ``transaction.on_commit`` of the scheduling cycle, so a
receiver only ever sees decisions that are in the database. A receiver should only queue
work (e.g. a reconcile task per workload id); one that raises is logged and does not stop
the others — the periodic reconcile pass converges whatever a lost hand-off missed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decisions:
    admitted_ids: tuple[int, ...]
    preempted_ids: tuple[int, ...]
    requeued_ids: tuple[int, ...] = ()


Receiver = Callable[[Decisions], None]
_receivers: list[Receiver] = []


def subscribe(receiver: Receiver) -> None:
    if receiver not in _receivers:
        _receivers.append(receiver)


def unsubscribe(receiver: Receiver) -> None:
    if receiver in _receivers:
        _receivers.remove(receiver)


def decisions_hand_off(decisions: Decisions) -> None:
    if not (decisions.admitted_ids or decisions.preempted_ids or decisions.requeued_ids):
        return
    for receiver in list(_receivers):
        try:
            receiver(decisions)
        except Exception:  # one broken receiver must not hide the decisions from the others
            log.exception("scheduling hand-off to %r failed", receiver)
