from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from secrets import randbelow
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.selectors import team_role
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass, Image
from apps.common import taskqueue
from apps.notifications.core import NoticeEvent
from apps.notifications.services import notify
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
            max_runtime_seconds=max_runtime_seconds,
            idle_timeout_seconds=idle_timeout_seconds,
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
    told = _NOTICES.get(event.to_state)
    if told is None or (actor is not None and actor.pk == workload.owner_id):
        return
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
    notify(
        event=kind,
        users=[workload.owner],
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
    now = timezone.now()
    changes: dict[str, Any] = {"state": to_state, "last_reason": reason[:500], "updated_at": now}
    stamp = core.state_timestamp_field(to_state)
    if stamp and getattr(workload, stamp) is None:
        changes[stamp] = now
    changes.update(extra or {})
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
    if workload.kind == core.KIND_SWEEP:
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
