"""Submitting a request: the one rule set's check, the workload and its sweep's trials recorded,
and a resubmission (clone) of a recorded workload."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from secrets import randbelow
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_role
from apps.audit.services import audit_record
from apps.catalog.models import GpuClass, Image
from apps.common import taskqueue
from apps.workloads import core, rules
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.request import TOPOLOGY_PARAM, WorkloadRequest
from apps.workloads.selectors import (
    request_context,
)


def workload_request_check(
    *, actor: User, team: Team, gpu_class: GpuClass, image: Image, request: WorkloadRequest
) -> rules.Charge:
    """The request rule set, whatever the door: what the request would be recorded and charged
    as, or PermissionDenied (not a member of the team) or ValidationError (field → message).
    Writes nothing; ``workload_submit`` and the API's dry run both ask it."""
    if team_role(actor, team.pk) is None and not platform_may(actor, Act.ACT_FOR_TEAMS):
        raise PermissionDenied("You are not a member of this team.")
    context = request_context(
        actor=actor, team=team, gpu_class=gpu_class, image=image, kind=request.kind
    )
    errors = rules.request_problems(request, context)
    if errors:
        raise ValidationError(errors)
    return rules.charge_of(request, context.gpu_class, context)


def workload_submit(
    *,
    actor: User,
    team: Team,
    gpu_class: GpuClass,
    image: Image,
    request: WorkloadRequest,
    source_ip: str | None = None,
    before_create: Callable[[WorkloadRequest, rules.Charge], None] | None = None,
) -> Workload:
    """Record a request for GPUs. It waits in ``pending`` until a scheduling cycle looks at it.

    ``request`` is the request as a door built it (:meth:`WorkloadRequest.of`); the one rule
    set checks it (``workload_request_check``) and the workload records what it is charged as.
    ``before_create`` is called with the accepted request and its charge before anything is
    written; what it raises stops the submission (a door's question, e.g. "this would preempt
    your notebook: confirm?", asked of layers this app does not know).

    A sweep's replicas are the points of its grid, each recorded as a trial of its own (one
    Workload row per point, with ``sweep`` set): the scheduler admits, charges and preempts
    trials, at most ``parallelism`` of a sweep at once. A sweep that samples ``ranges`` without
    a ``seed`` gets one drawn here and recorded, so that its trials and a resubmission are the
    same. Secrets and datasets named by the request are recorded resolved.
    """
    request = _seeded(request)
    charge = workload_request_check(
        actor=actor, team=team, gpu_class=gpu_class, image=image, request=request
    )
    if before_create is not None:
        before_create(request, charge)
    with transaction.atomic():
        workload = Workload.objects.create(
            owner=actor,
            team=team,
            gpu_class=gpu_class,
            image=image,
            state=core.PENDING,
            **_recorded_fields(request, charge),
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
            _trials_create(sweep=workload, points=core.sweep_points_of(workload.params))
        taskqueue.SCHEDULING_CYCLE.on_commit()  # admit it now if it fits
    return workload


def _seeded(request: WorkloadRequest) -> WorkloadRequest:
    """A sampling sweep's request with its seed: as asked, else drawn now (and recorded)."""
    if request.kind != core.KIND_SWEEP or not request.sampled or request.seed is not None:
        return request
    return replace(request, seed=randbelow(rules.MAX_SEED + 1))


def _recorded_fields(request: WorkloadRequest, charge: rules.Charge) -> dict[str, Any]:
    """The Workload row's fields for an accepted request: as asked, or as charged."""
    return {
        "name": request.name,
        "kind": request.kind,
        "gpu_milli": charge.gpu_milli,
        "replicas": charge.replicas,
        "charged_milli": charge.charged_milli,
        "priority_class": charge.priority_class,
        "command": list(request.command),
        "args": list(request.args),
        "env": dict(request.env),
        "secrets": list(charge.secrets),
        "datasets": list(charge.datasets),
        "max_runtime_seconds": charge.max_runtime_seconds,
        "idle_timeout_seconds": charge.idle_timeout_seconds,
        "retries": request.retries,
        "requeue_on_preemption": request.requeue_on_preemption,
        "params": _recorded_params(request, charge),
    }


def _recorded_params(request: WorkloadRequest, charge: rules.Charge) -> dict[str, Any]:
    """``params`` as recorded: the request's own, a sweep's grid, parallelism and sampling, an
    endpoint's settings (what a clone reads back, :meth:`WorkloadRequest.of`)."""
    params = dict(request.params)
    if request.grid:
        params["grid"] = {k: list(v) for k, v in request.grid.items()}
    if charge.parallelism is not None:
        params["parallelism"] = charge.parallelism
    if request.sampled:
        params.update({"ranges": request.ranges, "samples": request.samples, "seed": request.seed})
    if request.topology is not None:
        params[TOPOLOGY_PARAM] = {
            "level": request.topology["level"],
            "required": bool(request.topology.get("required", False)),
        }
    if charge.endpoint is not None:
        # The first replica is admitted like any request; the rest up to the minimum follow
        # it as scale-ups (each admitted in turn, waiting with a reason when it cannot).
        params["endpoint"] = {
            **charge.endpoint,
            "target_replicas": max(1, int(charge.endpoint["min_replicas"])),
            "revision": 1,
        }
    return params


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
    """One trial per point (core.sweep_points_of: the grid's or the samples', in order), each
    with its own command and arguments: the sweep's with the point's values in their
    ``{name}`` placeholders (core.sweep_argv), what the trial runs and its page shows."""
    values = {f: getattr(sweep, f) for f in TRIAL_FIELDS if f not in ("command", "args")}
    own = ("grid", "parallelism", "ranges", "samples", "seed")
    shared = {k: v for k, v in (sweep.params or {}).items() if k not in own}
    argv = [core.sweep_argv(sweep.command or [], sweep.args or [], point) for point in points]
    trials = Workload.objects.bulk_create(
        Workload(
            **values,
            command=argv[index][0],
            args=argv[index][1],
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


CLONED_FIELDS = (  # besides the team, the GPU class and the image
    "kind",
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
    before_create: Callable[[WorkloadRequest, rules.Charge], None] | None = None,
) -> Workload:
    """Submit a new workload with the same request (resubmit). The request rules apply again;
    a sweep's replicas are derived from its grid again (rows recorded before that rule may
    hold one replica for many points)."""
    values = {f: getattr(workload, f) for f in CLONED_FIELDS}
    if workload.kind in (core.KIND_SWEEP, core.KIND_INFERENCE):
        values["replicas"] = None
    return workload_submit(
        actor=actor,
        team=workload.team,
        gpu_class=workload.gpu_class,
        image=workload.image,
        request=WorkloadRequest.of(**values, name=name or f"{workload.name} (copy)"[:100]),
        source_ip=source_ip,
        before_create=before_create,
    )
