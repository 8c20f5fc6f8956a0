from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from secrets import randbelow
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import OperationalError, transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.selectors import team_role
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass, Image
from apps.common import taskqueue
from apps.credentials import core as credential_core
from apps.credentials import services as credential_services
from apps.credentials.models import EndpointKey
from apps.credentials.selectors import endpoint_key_matches
from apps.credentials.services import CreatedKey
from apps.notifications.core import NoticeEvent
from apps.notifications.services import Notification, notify_many
from apps.workloads import core, rules
from apps.workloads.models import RequestTemplate, Workload, WorkloadEvent
from apps.workloads.selectors import (
    request_context,
    workload_may_manage,
    workloads_visible_to,
)


def workload_request_check(
    *, actor: User, team: Team, gpu_class: GpuClass, image: Image, request: rules.WorkloadRequest
) -> rules.Charge:
    """The request rule set, whatever the door: what the request would be recorded and charged
    as, or PermissionDenied (not a member of the team) or ValidationError (field → message).
    Writes nothing; ``workload_submit`` and the API's dry run both ask it."""
    if team_role(actor, team.pk) is None and not actor.is_staff:
        raise PermissionDenied("You are not a member of this team.")
    context = request_context(actor=actor, team=team, gpu_class=gpu_class, image=image)
    errors = rules.request_problems(request, context)
    if errors:
        raise ValidationError(errors)
    return rules.charge_of(request, context.gpu_class, context)


def workload_submit(
    *,
    actor: User,
    team: Team,
    kind: str,
    name: str,
    gpu_class: GpuClass,
    image: Image,
    gpu_milli: int,
    replicas: int | None = None,
    priority_class: str | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    max_runtime_seconds: int | None = None,
    idle_timeout_seconds: int | None = None,
    retries: int = 0,
    requeue_on_preemption: bool = True,
    grid: dict[str, list[str]] | None = None,
    params: dict[str, Any] | None = None,
    secrets: list[dict[str, Any]] | None = None,
    datasets: list[Any] | None = None,
    parallelism: int | None = None,
    ranges: dict[str, list[Any]] | None = None,
    samples: int | None = None,
    seed: int | None = None,
    endpoint: dict[str, Any] | None = None,
    source_ip: str | None = None,
    before_create: Callable[[rules.WorkloadRequest, rules.Charge], None] | None = None,
) -> Workload:
    """Record a request for GPUs. It waits in ``pending`` until a scheduling cycle looks at it.

    ``before_create`` is called with the accepted request and its charge before anything is
    written; what it raises stops the submission (a door's question, e.g. "this would preempt
    your notebook: confirm?", asked of layers this app does not know).

    A sweep's grid comes as ``grid`` (or, resubmitted, in ``params``); its replicas are the
    points of the grid, each recorded as a trial of its own (one Workload row per point, with
    ``sweep`` set): the scheduler admits, charges and preempts trials, at most
    ``parallelism`` of a sweep at once. Instead of a grid, a sweep may sample ``samples``
    points of ``ranges`` with ``seed`` (drawn and recorded when absent, so that the trials
    and a resubmission are the same). ``secrets`` refers to team or personal secrets by name
    (``{name, env, key}``), ``datasets`` to the team's datasets by name (a recorded
    workload's resolved entries are taken by their names); the workload records both resolved.
    """
    params = dict(params or {})
    if grid is None and kind == core.KIND_SWEEP:
        grid = params.get("grid")
    if kind == core.KIND_SWEEP:
        parallelism = params.get("parallelism") if parallelism is None else parallelism
        if ranges is None and samples is None:
            ranges, samples = params.get("ranges"), params.get("samples")
            seed = params.get("seed") if seed is None else seed
        if (ranges is not None or samples is not None) and seed is None:
            seed = randbelow(rules.MAX_SEED + 1)
    request = rules.WorkloadRequest(
        kind=kind,
        name=name,
        gpu_milli=gpu_milli,
        replicas=replicas,
        priority_class=priority_class,
        command=tuple(command or ()),
        args=tuple(args or ()),
        env=dict(env or {}),
        grid=grid,
        max_runtime_seconds=max_runtime_seconds,
        idle_timeout_seconds=idle_timeout_seconds,
        retries=retries,
        requeue_on_preemption=requeue_on_preemption,
        secrets=tuple(rules.SecretRef.of(ref) for ref in secrets or ()),
        datasets=dataset_names(datasets),
        parallelism=parallelism,
        ranges=ranges,
        samples=samples,
        seed=seed,
        endpoint=_endpoint_request(kind, endpoint, params),
    )
    charge = workload_request_check(
        actor=actor, team=team, gpu_class=gpu_class, image=image, request=request
    )
    if before_create is not None:
        before_create(request, charge)
    if grid:
        params["grid"] = {k: list(v) for k, v in grid.items()}
    if charge.parallelism is not None:
        params["parallelism"] = charge.parallelism
    if request.sampled:
        params.update({"ranges": ranges, "samples": samples, "seed": seed})
    if charge.endpoint is not None:
        # The first replica is admitted like any request; the rest up to the minimum follow
        # it as scale-ups (each admitted in turn, waiting with a reason when it cannot).
        params["endpoint"] = {
            **charge.endpoint,
            "target_replicas": max(1, int(charge.endpoint["min_replicas"])),
            "revision": 1,
        }
    with transaction.atomic():
        workload = Workload.objects.create(
            name=name,
            kind=kind,
            owner=actor,
            team=team,
            gpu_class=gpu_class,
            image=image,
            gpu_milli=charge.gpu_milli,
            replicas=charge.replicas,
            charged_milli=charge.charged_milli,
            priority_class=charge.priority_class,
            command=command or [],
            args=args or [],
            env=env or {},
            secrets=list(charge.secrets),
            datasets=list(charge.datasets),
            max_runtime_seconds=charge.max_runtime_seconds,
            idle_timeout_seconds=charge.idle_timeout_seconds,
            retries=retries,
            requeue_on_preemption=requeue_on_preemption,
            params=params,
            state=core.PENDING,
        )
        WorkloadEvent.objects.create(
            workload=workload,
            from_state="",
            to_state=core.PENDING,
            reason="Submitted.",
            actor=actor,
        )
        audit_record(
            actor=actor,
            action="workload.submit",
            obj=workload,
            source_ip=source_ip,
            details={"total_milli": workload.total_milli, "gpu_class": gpu_class.name},
        )
        if workload.kind == core.KIND_SWEEP:
            _trials_create(sweep=workload, points=core.sweep_points_of(params))
        taskqueue.SCHEDULING_CYCLE.on_commit()  # admit it now if it fits
    return workload


def _endpoint_request(
    kind: str, endpoint: dict[str, Any] | None, params: dict[str, Any]
) -> rules.EndpointRequest | None:
    """An endpoint's fields as a door passed them, or as a recorded one (a clone) keeps them."""
    if kind != core.KIND_INFERENCE:
        return None
    values = endpoint if endpoint is not None else params.get("endpoint")
    return rules.EndpointRequest.of(values if isinstance(values, dict) else {})


def dataset_names(datasets: Any) -> Any:
    """Names as a door passed them, or the names of a recorded workload's resolved entries
    (a clone); anything else goes to the rules as it is, to be refused there."""
    if not isinstance(datasets, list | tuple):
        return datasets if datasets else ()
    return tuple(d.get("name", "") if isinstance(d, dict) else d for d in datasets)


TRIAL_FIELDS = (
    "kind",
    "owner",
    "team",
    "gpu_class",
    "image",
    "gpu_milli",
    "charged_milli",
    "priority_class",
    "command",
    "args",
    "env",
    "secrets",
    "datasets",
    "cpu_milli",
    "memory_mib",
    "max_runtime_seconds",
    "idle_timeout_seconds",
    "retries",
    "requeue_on_preemption",
    "created_at",
)


def _trials_create(*, sweep: Workload, points: list[dict[str, str]]) -> list[Workload]:
    """One trial per point (core.sweep_points_of: the grid's or the samples', in order)."""
    values = {f: getattr(sweep, f) for f in TRIAL_FIELDS}
    own = ("grid", "parallelism", "ranges", "samples", "seed")
    shared = {k: v for k, v in (sweep.params or {}).items() if k not in own}
    trials = Workload.objects.bulk_create(
        Workload(
            **values,
            name=f"{sweep.name[: rules.MAX_NAME_LENGTH - 8]} #{index}",
            replicas=1,
            params={**shared, "grid": {k: [v] for k, v in point.items()}, "point": point},
            state=core.PENDING,
            sweep=sweep,
            trial_index=index,
        )
        for index, point in enumerate(points)
    )
    WorkloadEvent.objects.bulk_create(
        WorkloadEvent(
            workload=t, from_state="", to_state=core.PENDING, reason="Submitted with its sweep."
        )
        for t in trials
    )
    return trials


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
            workload=workload, from_state=current, to_state=to_state, reason=reason, actor=actor
        )
        if workload.sweep_id is not None:
            sweep_state_refresh(sweep_id=workload.sweep_id)
        else:
            # Trials are told about through their sweep, not one notice per trial.
            _notify_owner(workload=workload, event=event, actor=actor, changes=changes)
    for field, value in changes.items():
        setattr(workload, field, value)
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
                reason=t.reason,
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


def workload_cancel(
    *, actor: User, workload: Workload, reason: str = "", source_ip: str | None = None
) -> Workload:
    """Cancel a workload that has not finished. Owners, team leads and admins may."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may cancel this workload.")
    if workload.is_sweep:
        # Its state follows its trials' and may have moved since the row was read.
        workload.refresh_from_db(fields=["state", "last_reason"])
    if workload.is_terminal:
        raise ValidationError(f"The workload has already {workload.state}; nothing to cancel.")
    text = reason or f"Cancelled by {actor.get_username()}."
    with transaction.atomic():
        if not workload_transition(
            workload=workload, to_state=core.CANCELLED, reason=text, actor=actor
        ):
            workload.refresh_from_db()
            raise ValidationError(f"The workload changed to {workload.state} meanwhile; try again.")
        audit_record(actor=actor, action="workload.cancel", obj=workload, source_ip=source_ip)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)
        if workload.is_sweep:
            for trial in workload.trials.exclude(state__in=core.TERMINAL_STATES):
                if workload_transition(
                    workload=trial, to_state=core.CANCELLED, reason=text, actor=actor
                ):
                    taskqueue.WORKLOAD_RECONCILE.on_commit(trial.pk)
        taskqueue.SCHEDULING_CYCLE.on_commit()  # its GPUs may start someone else
    return workload


def workload_suspend(*, actor: User, workload: Workload, source_ip: str | None = None) -> Workload:
    """Stop a notebook and keep its storage; it can be resumed later."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may suspend this notebook.")
    if workload.kind != core.KIND_NOTEBOOK:
        raise ValidationError("Only notebooks can be suspended; cancel other workloads instead.")
    if workload.state not in (core.STARTING, core.RUNNING):
        raise ValidationError(f"A notebook that is {workload.state} cannot be suspended.")
    reason = f"Suspended by {actor.get_username()}; your files are kept."
    if not _suspend(workload=workload, reason=reason, actor=actor, source_ip=source_ip):
        raise ValidationError("The notebook changed state meanwhile; try again.")
    return workload


def workload_suspend_idle(*, workload: Workload, reason: str) -> bool:
    """Suspend an idle notebook as the system (idle culling): the same transition as
    ``workload_suspend`` without a person's permission check. False if it is not a running
    notebook or lost a race. Call it inside the caller's transaction to add records to it."""
    if workload.kind != core.KIND_NOTEBOOK or workload.state not in (core.STARTING, core.RUNNING):
        return False
    return _suspend(
        workload=workload,
        reason=reason,
        actor=None,
        action="workload.idle_suspend",
        details={"reason": reason},
    )


def _suspend(
    *,
    workload: Workload,
    reason: str,
    actor: User | None,
    action: str = "workload.suspend",
    source_ip: str | None = None,
    details: dict[str, Any] | None = None,
) -> bool:
    """The one suspend: storage kept, objects removed by the next reconcile."""
    with transaction.atomic():
        if not workload_transition(
            workload=workload,
            to_state=core.SUSPENDED,
            reason=reason,
            actor=actor,
            expected_from=workload.state,
        ):
            return False
        audit_record(actor=actor, action=action, obj=workload, source_ip=source_ip, details=details)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)
    return True


def workload_resume(*, actor: User, workload: Workload, source_ip: str | None = None) -> Workload:
    """Queue a suspended notebook again; the scheduler admits it when capacity allows."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may resume this notebook.")
    if workload.state != core.SUSPENDED:
        raise ValidationError(
            f"Only a suspended notebook can be resumed; this one is {workload.state}."
        )
    with transaction.atomic():
        reason = f"Resumed by {actor.get_username()}; waiting for a GPU."
        if not workload_transition(
            workload=workload,
            to_state=core.QUEUED,
            reason=reason,
            actor=actor,
            extra={"placement": {}, "cluster": None},
        ):
            raise ValidationError("The notebook changed state meanwhile; try again.")
        audit_record(actor=actor, action="workload.resume", obj=workload, source_ip=source_ip)
    return workload


CLONED_FIELDS = (
    "kind",
    "team",
    "gpu_class",
    "image",
    "gpu_milli",
    "replicas",
    "priority_class",
    "command",
    "args",
    "env",
    "secrets",
    "datasets",
    "max_runtime_seconds",
    "idle_timeout_seconds",
    "retries",
    "requeue_on_preemption",
    "params",
)


def workload_clone(
    *,
    actor: User,
    workload: Workload,
    name: str | None = None,
    source_ip: str | None = None,
    before_create: Callable[[rules.WorkloadRequest, rules.Charge], None] | None = None,
) -> Workload:
    """Submit a new workload with the same request (resubmit). The request rules apply again;
    a sweep's replicas are derived from its grid again (rows recorded before that rule may
    hold one replica for many points)."""
    values = {f: getattr(workload, f) for f in CLONED_FIELDS}
    if workload.kind in (core.KIND_SWEEP, core.KIND_INFERENCE):
        values["replicas"] = None
    return workload_submit(
        actor=actor,
        name=name or f"{workload.name} (copy)"[:100],
        source_ip=source_ip,
        before_create=before_create,
        **values,
    )


# --- request templates (the portal's "save as template" / "start from a template") -------------


def request_template_save(
    *,
    actor: User,
    name: str,
    kind: str,
    values: dict[str, str],
    team: Team | None = None,
    source_ip: str | None = None,
) -> RequestTemplate:
    """Save a request under a name; saving again under the same name replaces it.

    With ``team`` the template is shared with that team's members (the actor must be one).
    """
    name = name.strip()
    errors: dict[str, str] = {}
    if not name:
        errors["name"] = "Give the template a name."
    if kind not in rules.SUBMITTABLE_KINDS:
        errors["kind"] = f"Unknown kind of workload: {kind!r}."
    if team is not None and not actor.is_staff and team_role(actor, team.pk) is None:
        errors["team"] = "You can share templates only with your own teams."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        template, created = RequestTemplate.objects.update_or_create(
            owner=actor,
            kind=kind,
            name=name[:100],
            defaults={"values": dict(values), "team": team},
        )
        audit_record(
            actor=actor,
            action="request_template.save",
            obj=template,
            source_ip=source_ip,
            details={"created": created, "shared_with": team.slug if team else None},
        )
    return template


def request_template_delete(
    *, actor: User, template: RequestTemplate, source_ip: str | None = None
) -> None:
    """Delete a template. Its owner and admins may; teammates it is shared with may not."""
    if not (actor.is_staff or template.owner_id == actor.pk):
        raise PermissionDenied("Only the template's owner may delete it.")
    with transaction.atomic():
        audit_record(
            actor=actor, action="request_template.delete", obj=template, source_ip=source_ip
        )
        template.delete()


def workload_delete(*, actor: User, workload: Workload, source_ip: str | None = None) -> None:
    """Remove a workload from every list: cancelled first if it still runs, its Kubernetes
    objects deleted by the reconciler. The row stays for accounting (GPU-hours, chargeback)
    and the audit trail."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may delete this workload.")
    with transaction.atomic():
        if not workload.is_terminal:
            workload_cancel(
                actor=actor, workload=workload, reason=f"Deleted by {actor.get_username()}."
            )
        Workload.objects.filter(pk=workload.pk, deleted_at__isnull=True).update(
            deleted_at=timezone.now()
        )
        audit_record(actor=actor, action="workload.delete", obj=workload, source_ip=source_ip)
        taskqueue.WORKLOAD_RECONCILE.on_commit(workload.pk)


# --- inference endpoints: scaling, waking, rolling updates -------------------------------------


def _endpoint_settings(workload: Workload) -> dict[str, Any]:
    return dict((workload.params or {}).get("endpoint") or {})


def _endpoint_save(workload: Workload, endpoint: dict[str, Any], **changes: Any) -> None:
    params = dict(workload.params or {})
    params["endpoint"] = endpoint
    Workload.objects.filter(pk=workload.pk).update(params=params, **changes)
    workload.params = params
    for key, value in changes.items():
        setattr(workload, key, value)


def endpoint_scale(
    *,
    actor: User | None,
    workload: Workload,
    replicas: Any,
    reason: str = "",
    source_ip: str | None = None,
) -> Workload:
    """Ask an endpoint to run ``replicas`` (its owner, a lead or an admin; ``actor`` None: the
    scaling loop). Fewer: the extra replicas go now. More: each added replica waits in the
    queue like any request and is admitted on the team's guarantee (the endpoint says why it
    waits). Zero, where the endpoint may scale to zero: it is scaled to zero (suspended) and
    the next call or a wake brings it back."""
    if actor is not None and not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may scale this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError({"replicas": "Only inference endpoints are scaled."})
    with transaction.atomic():
        # The scheduler's scale-ups lock the row too: a cycle and a scale-down take turns.
        locked = Workload.objects.select_for_update().get(pk=workload.pk)
        endpoint = _endpoint_settings(locked)
        low = int(endpoint.get("min_replicas") or 0)
        high = int(endpoint.get("max_replicas") or 1)
        if not rules._whole_number(replicas) or not low <= replicas <= high:
            raise ValidationError(
                {"replicas": f"This endpoint runs between {low} and {high} replicas."}
            )
        if locked.state == core.SUSPENDED and replicas > 0:
            _endpoint_save(locked, {**endpoint, "target_replicas": replicas})
            endpoint_wake(actor=actor, workload=locked, source_ip=source_ip)
            return locked
        if locked.state not in core.ACTIVE_STATES:
            raise ValidationError(
                {"replicas": f"An endpoint that is {locked.state} cannot be scaled."}
            )
        who = actor.get_username() if actor else "the scaling loop"
        text = reason or f"Scaled to {replicas} replicas by {who}."
        if replicas == 0:
            _endpoint_save(locked, {**endpoint, "target_replicas": 0, "scale_waiting": ""})
            _suspend(
                workload=locked,
                reason=f"Scaled to zero: {text}",
                actor=actor,
                action="endpoint.scale",
                source_ip=source_ip,
                details={"replicas": 0},
            )
            taskqueue.SCHEDULING_CYCLE.on_commit()
            return locked
        endpoint.update(target_replicas=replicas, scale_waiting="")
        changes: dict[str, Any] = {}
        if replicas < locked.replicas:
            placement = dict(locked.placement or {})
            placement["replicas"] = list(placement.get("replicas") or [])[:replicas]
            changes = {"replicas": replicas, "placement": placement}
        elif replicas > locked.replicas:
            endpoint["scale_requested_at"] = timezone.now().isoformat()
        _endpoint_save(locked, endpoint, **changes)
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            reason=text[:500],
            actor=actor,
        )
        audit_record(
            actor=actor,
            action="endpoint.scale",
            obj=locked,
            source_ip=source_ip,
            details={"replicas": replicas},
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
        taskqueue.SCHEDULING_CYCLE.on_commit()
    workload.refresh_from_db()
    return workload


def endpoint_wake(*, actor: User | None, workload: Workload, source_ip: str | None = None) -> bool:
    """Queue an endpoint scaled to zero again (a call came, or its owner asked): its first
    replica is admitted like any request, the rest follow up to its target. False if it is
    not scaled to zero (any more)."""
    if actor is not None and not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may wake this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        return False
    with transaction.atomic():
        endpoint = _endpoint_settings(workload)
        target = max(
            1, int(endpoint.get("target_replicas") or 0), int(endpoint.get("min_replicas") or 0)
        )
        woke = workload_transition(
            workload=workload,
            to_state=core.QUEUED,
            reason="Waking up: a call came in."
            if actor is None
            else f"Woken by {actor.get_username()}.",
            actor=actor,
            expected_from=core.SUSPENDED,
            extra={"placement": {}, "cluster": None, "replicas": 1},
        )
        if not woke:
            return False
        _endpoint_save(workload, {**endpoint, "target_replicas": target})
        audit_record(actor=actor, action="endpoint.wake", obj=workload, source_ip=source_ip)
        taskqueue.SCHEDULING_CYCLE.on_commit()
    return True


# What a rollout changes (and a rollback puts back) besides the image and the environment.
ROLLOUT_FIELDS = (
    "model_path",
    "model_uri",
    "model_secret",
    "model_secret_k8s",
    "model_secret_keys",
)


def endpoint_update(
    *,
    actor: User,
    workload: Workload,
    image: Image | None = None,
    env: dict[str, Any] | None = None,
    model_path: str | None = None,
    model_uri: str | None = None,
    model_secret: str | None = None,
    source_ip: str | None = None,
) -> Workload:
    """Roll out a new image, model or environment without downtime: the Deployment adds a
    replica of the new revision before it takes an old one away, and the status pass rolls
    back to the previous revision by itself when the new replicas do not become ready in
    ENDPOINT_PROGRESS_DEADLINE_SECONDS. The request rules apply again, as at submit."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may update this endpoint.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError("Only inference endpoints are updated in place.")
    if workload.state not in core.ACTIVE_STATES and workload.state != core.SUSPENDED:
        raise ValidationError(f"An endpoint that is {workload.state} cannot be updated.")
    endpoint = _endpoint_settings(workload)
    asked = dict(endpoint)
    if model_path is not None or model_uri is not None:
        asked["model_path"], asked["model_uri"] = model_path or "", model_uri or ""
        asked["model_secret"] = model_secret or ""
    elif model_secret is not None:
        asked["model_secret"] = model_secret
    new_image = image or workload.image
    new_env = dict(workload.env or {}) if env is None else env
    request = rules.WorkloadRequest(
        kind=workload.kind,
        name=workload.name,
        gpu_milli=workload.gpu_milli,
        priority_class=workload.priority_class,
        command=tuple(workload.command or ()),
        args=tuple(workload.args or ()),
        env=new_env,
        secrets=tuple(rules.SecretRef.of(ref) for ref in workload.secrets or ()),
        datasets=dataset_names(workload.datasets),
        endpoint=rules.EndpointRequest.of(asked),
    )
    charge = workload_request_check(
        actor=actor,
        team=workload.team,
        gpu_class=workload.gpu_class,
        image=new_image,
        request=request,
    )
    assert charge.endpoint is not None
    with transaction.atomic():
        locked = Workload.objects.select_for_update().get(pk=workload.pk)
        current = _endpoint_settings(locked)
        revision = int(current.get("revision") or 1) + 1
        previous = {
            "revision": current.get("revision") or 1,
            "image": locked.image_id,
            "env": dict(locked.env or {}),
            "pod_annotations": current.get("pod_annotations") or {},
            **{k: current.get(k) for k in ROLLOUT_FIELDS},
        }
        updated = {
            **current,
            **{k: charge.endpoint[k] for k in ROLLOUT_FIELDS},
            "revision": revision,
            "previous": previous,
            "rollout": {
                "revision": revision,
                "state": "progressing",
                "started_at": timezone.now().isoformat(),
                "message": "Rolling out: new replicas start before old ones stop.",
            },
        }
        _endpoint_save(locked, updated, image=new_image, env=new_env)
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            actor=actor,
            reason=f"Rolling out revision {revision} by {actor.get_username()}.",
        )
        audit_record(
            actor=actor,
            action="endpoint.update",
            obj=locked,
            source_ip=source_ip,
            details={"revision": revision, "image": new_image.name},
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
    workload.refresh_from_db()
    return workload


def endpoint_rollout_observed(
    *, workload: Workload, state: str, message: str, updated: int, ready: int
) -> str | None:
    """Record what the cluster says of a rollout in progress: still progressing (with how many
    replicas run the new revision), complete, or failed — then the previous revision is put
    back by itself. Returns the rollout's new state, or None if nothing changed."""
    with transaction.atomic():
        locked = Workload.objects.select_for_update().filter(pk=workload.pk).first()
        if locked is None:
            return None
        endpoint = _endpoint_settings(locked)
        rollout = dict(endpoint.get("rollout") or {})
        if rollout.get("state") != "progressing":
            return None
        rollout.update(updated=updated, ready=ready, message=message[:300])
        if state == "progressing":
            if rollout != endpoint.get("rollout"):
                _endpoint_save(locked, {**endpoint, "rollout": rollout})
            return None
        if state == "complete":
            rollout["state"] = "complete"
            endpoint["rollout"] = rollout
            _endpoint_save(locked, endpoint)
            WorkloadEvent.objects.create(
                workload=locked,
                from_state=locked.state,
                to_state=locked.state,
                reason=f"Revision {rollout.get('revision')} rolled out: {message}"[:500],
            )
            return "complete"
        previous = dict(endpoint.get("previous") or {})
        revision = int(endpoint.get("revision") or 1) + 1
        image_id = previous.get("image")
        image = (
            Image.objects.filter(pk=image_id).first() if isinstance(image_id, int) else None
        ) or locked.image
        rollout.update(state="rolled back", finished_at=timezone.now().isoformat())
        restored = {
            **endpoint,
            **{k: previous.get(k) for k in ROLLOUT_FIELDS if k in previous},
            "pod_annotations": previous.get("pod_annotations") or {},
            "revision": revision,
            "rollout": rollout,
        }
        _endpoint_save(locked, restored, image=image, env=previous.get("env") or {})
        WorkloadEvent.objects.create(
            workload=locked,
            from_state=locked.state,
            to_state=locked.state,
            reason=(
                f"Revision {rollout.get('revision')} did not become ready ({message}); rolled "
                f"back to the previous image, model and environment as revision {revision}."
            )[:500],
        )
        audit_record(
            actor=None, action="endpoint.rollback", obj=locked, details={"revision": revision}
        )
        taskqueue.WORKLOAD_RECONCILE.on_commit(locked.pk)
        return "rolled back"


# --- endpoint keys and calls ------------------------------------------------------------------


def endpoint_key_create(
    *, actor: User, workload: Workload, name: str, source_ip: str | None = None
) -> CreatedKey:
    """A new key for the endpoint (its owner, a lead of its team, an admin); the key is in
    the answer once and never again."""
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may create keys.")
    if workload.kind != core.KIND_INFERENCE:
        raise ValidationError({"name": "Only inference endpoints take keys."})
    if workload.is_terminal:
        raise ValidationError({"name": f"The endpoint has {workload.state}; it takes no calls."})
    return credential_services.endpoint_key_create(
        actor=actor, team=workload.team, endpoint_id=workload.pk, name=name, source_ip=source_ip
    )


def endpoint_key_revoke(
    *, actor: User, workload: Workload, key_id: int, source_ip: str | None = None
) -> bool:
    if not workload_may_manage(actor, workload):
        raise PermissionDenied("Only the owner, a team lead or an admin may revoke keys.")
    key = EndpointKey.objects.filter(pk=key_id, endpoint_id=workload.pk).first()
    if key is None:
        raise EndpointKey.DoesNotExist("No such key for this endpoint.")
    return credential_services.endpoint_key_revoke(actor=actor, key=key, source_ip=source_ip)


@dataclass(frozen=True)
class CallVerdict:
    status: int  # 200 let through, 401 no valid key or session, 403 not for this person/endpoint
    message: str
    waking: bool = False


def endpoint_call_authorise(
    *, user: User | None, endpoint_id: int, authorization: str = "", api_key: str = ""
) -> CallVerdict:
    """Whether a call to an endpoint may pass the ingress: a signed-in member of its team (or a
    platform admin), or a live key of this very endpoint. A call that may pass an endpoint
    scaled to zero wakes it (the ingress answers 503 until a replica is ready)."""
    workload = (
        Workload.objects.filter(pk=endpoint_id, kind=core.KIND_INFERENCE, deleted_at__isnull=True)
        .select_related("team")
        .first()
    )
    presented = credential_core.presented_key(authorization, api_key)
    allowed = False
    if workload is not None and presented:
        key = endpoint_key_matches(endpoint_id=workload.pk, plaintext=presented)
        if key is None:
            return CallVerdict(401, "That key does not open this endpoint (wrong or revoked).")
        credential_services.endpoint_key_used(key=key)
        allowed = True
    elif workload is not None and user is not None and user.is_authenticated:
        allowed = user.is_staff or team_role(user, workload.team_id) is not None
        if not allowed:
            return CallVerdict(403, "Only members of the endpoint's team may call it.")
    if workload is None:
        return CallVerdict(401 if not presented else 403, "No such endpoint.")
    if not allowed:
        return CallVerdict(401, "Call with one of the endpoint's keys: Authorization: Bearer …")
    if workload.is_terminal:
        return CallVerdict(403, f"The endpoint has {workload.state}; it takes no calls.")
    if workload.state == core.SUSPENDED:
        endpoint_wake(actor=None, workload=workload)
        return CallVerdict(200, "Scaled to zero: waking up; retry in a minute.", waking=True)
    return CallVerdict(200, "ok")


BULK_CANCEL_MAX = 200


@dataclass(frozen=True)
class BulkCancelResult:
    cancelled: list[str]
    refused: list[str]  # "name: why", for each one the actor may see but not cancel now


def workloads_cancel_many(
    *, actor: User, ids: Iterable[int], source_ip: str | None = None
) -> BulkCancelResult:
    """Cancel each workload through :func:`workload_cancel` (its checks and audit, one at a
    time); ids the actor cannot see are skipped as if they did not exist."""
    wanted = list(dict.fromkeys(ids))[:BULK_CANCEL_MAX]
    cancelled: list[str] = []
    refused: list[str] = []
    for workload in workloads_visible_to(actor).filter(pk__in=wanted).order_by("pk"):
        try:
            workload_cancel(actor=actor, workload=workload, source_ip=source_ip)
        except (PermissionDenied, ValidationError) as exc:
            why = exc.messages[0] if isinstance(exc, ValidationError) else str(exc)
            refused.append(f"{workload.name}: {why}")
        else:
            cancelled.append(workload.name)
    return BulkCancelResult(cancelled=cancelled, refused=refused)
