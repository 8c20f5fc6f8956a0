"""A workload's states: transitions (one or many together, each an event with a reason, the
owner notified), the queue, and a sweep's state derived from its trials'."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import OperationalError, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.accounts.models import User
from apps.notifications.core import NoticeEvent
from apps.notifications.services import Notification, notify_many
from apps.workloads import core
from apps.workloads.models import Workload, WorkloadEvent


def sweep_state_refresh(*, sweep_id: int) -> str | None:
    """Derive a sweep's own state from its trials' and record it when it changes.

    Running while any trial has started and others are not done; succeeded when every trial
    succeeded; failed when all are done and any failed (saying how many); cancelled when
    cancelled. The sweep holds no GPUs, so this is no lifecycle of its own: the state is
    written directly (after locking the row, so that two trials ending together cannot both
    write a stale count), not through ``workload_transition``'s table."""
    with transaction.atomic():
        sweep = Workload.objects.select_for_update().filter(pk=sweep_id).first()
        if sweep is None or sweep.is_terminal:
            return None
        states = list(sweep.trials.values_list("state", flat=True))
        target, reason = core.sweep_state(states)
        if target == sweep.state and reason == sweep.last_reason:
            return None
        now = timezone.now()
        changes: dict[str, Any] = {"state": target, "last_reason": reason[:500], "updated_at": now}
        if target == core.RUNNING and sweep.started_at is None:
            changes["started_at"] = now
        if target == core.QUEUED and sweep.queued_at is None:
            changes["queued_at"] = now
        if target in core.TERMINAL_STATES:
            changes["finished_at"] = now
        Workload.objects.filter(pk=sweep.pk).update(**changes)
        if target != sweep.state:
            event = WorkloadEvent.objects.create(
                workload=sweep, from_state=sweep.state, to_state=target, reason=reason[:500]
            )
            _notify_owner(workload=sweep, event=event, actor=None, changes=changes)
    return target


# The states a workload's owner hears about, and how they are told.
_NOTICES: dict[str, tuple[NoticeEvent, str]] = {
    core.ADMITTED: (NoticeEvent.ADMITTED, "{name} was admitted"),
    core.RUNNING: (NoticeEvent.RUNNING, "{name} is running"),
    core.SUCCEEDED: (NoticeEvent.FINISHED, "{name} finished"),
    core.FAILED: (NoticeEvent.FAILED, "{name} failed"),
    core.PREEMPTED: (NoticeEvent.PREEMPTED, "{name} was preempted"),
    core.SUSPENDED: (NoticeEvent.SUSPENDED, "{name} was suspended"),
}


def _notify_owner(
    *, workload: Workload, event: WorkloadEvent, actor: User | None, changes: dict[str, Any]
) -> None:
    """Tell the owner about a change they did not make themselves (one notice per event row,
    so a workload admitted twice, after a preemption, is told about twice). ``changes`` are
    the columns the transition is writing (the row in hand still holds the old values)."""
    notice = _owner_notice(workload=workload, event=event, actor=actor, changes=changes)
    if notice is not None:
        notify_many([notice])


def _owner_notice(
    *, workload: Workload, event: WorkloadEvent, actor: User | None, changes: dict[str, Any]
) -> Notification | None:
    """The notice :func:`_notify_owner` sends, or None when the owner is not told."""
    told = _NOTICES.get(event.to_state)
    if told is None or (actor is not None and actor.pk == workload.owner_id):
        return None
    kind, title = told
    state = Workload.State(event.to_state).label
    reason = event.reason.strip()
    if reason and reason[-1] not in ".!?)":
        reason += "."
    lines = [
        reason[:1].upper() + reason[1:] if reason.lower() != f"{state.lower()}." else "",
        f"State: {state}. Team {workload.team.name}, {workload.gpu_class.name}.",
    ]
    started, finished = changes.get("started_at", workload.started_at), changes.get("finished_at")
    if started and finished:
        lines.append(f"Ran for {core.describe_duration(finished - started)}.")
    return Notification(
        event=kind,
        user=workload.owner,
        title=title.format(name=f"{workload.get_kind_display()} {workload.name}"),
        body="\n".join(line for line in lines if line),
        key=f"workload-event-{event.pk}",
        link=f"/workloads/{workload.pk}/",
        team=workload.team,
    )


def workload_transition(
    *,
    workload: Workload,
    to_state: str,
    reason: str,
    actor: User | None = None,
    expected_from: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bool:
    """Move a workload to ``to_state`` and record the event. Returns False if it lost a race.

    The update is conditional on the state we read: two workers (or a worker and a user)
    acting on the same workload cannot both apply a transition from the same state.
    """
    current = expected_from or workload.state
    core.check_transition(current, to_state)
    changes = _transition_changes(workload, to_state, reason, extra, timezone.now())
    with transaction.atomic():
        if workload.sweep_id is not None:
            # A trial locks its sweep before itself, as sweep_state_refresh and the sweep's
            # cancel do: always in that order, two trials ending together (or a trial ending
            # while its sweep is cancelled) wait for each other instead of deadlocking.
            list(Workload.objects.select_for_update().filter(pk=workload.sweep_id).values("pk"))
        claimed = Workload.objects.filter(pk=workload.pk, state=current).update(**changes)
        if claimed != 1:
            return False
        event = WorkloadEvent.objects.create(
            workload=workload,
            from_state=current,
            to_state=to_state,
            reason=reason[:500],
            actor=actor,
        )
        if workload.sweep_id is not None:
            sweep_state_refresh(sweep_id=workload.sweep_id)
        else:
            # Trials are told about through their sweep, not one notice per trial.
            _notify_owner(workload=workload, event=event, actor=actor, changes=changes)
    for field, value in changes.items():
        setattr(workload, field, value)
    return True


def workload_event_note(
    *,
    workload: Workload,
    reason: str,
    last_reason: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bool:
    """Record what happened to a workload that changed no state (a retry after a failure seen
    only once the program ran again): an event from its state to the same state, with
    ``reason``, and ``last_reason`` (else ``reason``) shown. Conditional on the state read;
    False if it changed meanwhile. Tells no one (the state the owner hears about did not move)."""
    changes: dict[str, Any] = {
        "last_reason": (last_reason or reason)[:500],
        "updated_at": timezone.now(),
    }
    changes.update({k: v for k, v in (extra or {}).items() if v is not None})
    with transaction.atomic():
        if Workload.objects.filter(pk=workload.pk, state=workload.state).update(**changes) != 1:
            return False
        WorkloadEvent.objects.create(
            workload=workload,
            from_state=workload.state,
            to_state=workload.state,
            reason=reason[:500],
        )
    for name, value in changes.items():
        setattr(workload, name, value)
    return True


def _transition_changes(
    workload: Workload, to_state: str, reason: str, extra: dict[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The columns a transition writes: the state, its reason and time, and ``extra``."""
    changes: dict[str, Any] = {"state": to_state, "last_reason": reason[:500], "updated_at": now}
    stamp = core.state_timestamp_field(to_state)
    if stamp and getattr(workload, stamp) is None:
        changes[stamp] = now
    changes.update(extra or {})
    return changes


@dataclass(frozen=True)
class Transition:
    """One change for :func:`workloads_transition`: the arguments of
    :func:`workload_transition`."""

    workload: Workload
    to_state: str
    reason: str
    expected_from: str | None = None
    extra: dict[str, Any] | None = None
    actor: User | None = None

    def apply_alone(self) -> bool:
        """This change on its own, through :func:`workload_transition`."""
        return workload_transition(
            workload=self.workload,
            to_state=self.to_state,
            reason=self.reason,
            actor=self.actor,
            expected_from=self.expected_from,
            extra=self.extra,
        )


def workloads_transition(transitions: Sequence[Transition]) -> list[bool]:
    """:func:`workload_transition` for each, in one transaction and a few statements beyond
    one conditional update per workload: the events in one insert, the owners' notices in
    :func:`notify_many`. Returns, for each, whether it was applied (False: it lost a race).

    A transition that is not allowed raises TransitionError before anything is written.
    A sweep's trials go one by one through :func:`workload_transition` (they lock their sweep
    first and refresh its state). The caller's rows are updated like the single call's."""
    for t in transitions:
        core.check_transition(t.expected_from or t.workload.state, t.to_state)
    try:
        return _transition_together(transitions)
    except OperationalError:
        # Deadlocked with another writer holding some of these rows (a user's cancel and a
        # sweep's refresh, say): PostgreSQL rolled the batch back; one by one instead.
        return [t.apply_alone() for t in transitions]


def _transition_together(transitions: Sequence[Transition]) -> list[bool]:
    now = timezone.now()
    applied = [False] * len(transitions)
    # Rows are locked in id order, so that two callers with overlapping batches wait for each
    # other instead of deadlocking.
    order = sorted(range(len(transitions)), key=lambda i: transitions[i].workload.pk)
    with transaction.atomic():
        claimed: list[tuple[int, Transition, str, dict[str, Any]]] = []
        for i in order:
            t = transitions[i]
            if t.workload.sweep_id is not None:
                applied[i] = t.apply_alone()
                continue
            current = t.expected_from or t.workload.state
            changes = _transition_changes(t.workload, t.to_state, t.reason, t.extra, now)
            if Workload.objects.filter(pk=t.workload.pk, state=current).update(**changes) == 1:
                claimed.append((i, t, current, changes))
        events = WorkloadEvent.objects.bulk_create(
            WorkloadEvent(
                workload=t.workload,
                from_state=current,
                to_state=t.to_state,
                reason=t.reason[:500],
                actor=t.actor,
            )
            for _, t, current, _ in claimed
        )
        notices = [
            notice
            for (_, t, _, changes), event in zip(claimed, events, strict=True)
            if (
                notice := _owner_notice(
                    workload=t.workload, event=event, actor=t.actor, changes=changes
                )
            )
            is not None
        ]
        notify_many(notices)
    for i, t, _, changes in claimed:
        applied[i] = True
        for field, value in changes.items():
            setattr(t.workload, field, value)
    return applied


def workloads_queue(*, workloads: Iterable[Workload], reason: str) -> list[int]:
    """Move every pending workload of ``workloads`` to ``queued``, as
    :func:`workload_transition` would one by one, in three statements for all of them: lock
    those still pending, update them, record their events. Queued tells no one, so there is
    no notice to send; a sweep's trial goes through :func:`workload_transition` (its sweep's
    state follows). Returns the ids moved; the rows in hand are updated to match."""
    rows = {w.pk: w for w in workloads if w.state == core.PENDING}
    trials = [w for w in rows.values() if w.sweep_id is not None]
    moved = [
        w.pk for w in trials if workload_transition(workload=w, to_state=core.QUEUED, reason=reason)
    ]
    plain = sorted(pk for pk, w in rows.items() if w.sweep_id is None)
    if not plain:
        return moved
    now = timezone.now()
    text = reason[:500]
    with transaction.atomic():
        claimed = list(
            Workload.objects.select_for_update()
            .filter(pk__in=plain, state=core.PENDING)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        if not claimed:
            return moved
        Workload.objects.filter(pk__in=claimed).update(
            state=core.QUEUED,
            last_reason=text,
            updated_at=now,
            queued_at=Coalesce(F("queued_at"), Value(now)),
        )
        WorkloadEvent.objects.bulk_create(
            WorkloadEvent(
                workload_id=pk,
                from_state=core.PENDING,
                to_state=core.QUEUED,
                reason=reason,
                created_at=now,
            )
            for pk in claimed
        )
    for pk in claimed:
        w = rows[pk]
        w.state, w.last_reason, w.updated_at = core.QUEUED, text, now
        if w.queued_at is None:
            w.queued_at = now
    return moved + claimed
