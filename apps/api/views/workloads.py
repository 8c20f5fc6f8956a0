"""Workloads over the REST API: list, submit (idempotent), retrieve, actions, logs, events.

Every lookup goes through ``workloads_visible_to``: another team's workload is 404, never 403,
so ids cannot be probed. Managing (cancel, suspend, resume) is checked again by the services:
a teammate who is neither owner nor lead gets 403.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from itertools import chain
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Team, User
from apps.accounts.selectors import teams_of
from apps.api.base import Conflict, PagePagination, error_responses
from apps.api.renderers import FastJSONRenderer
from apps.api.serializers import (
    ROW_VALUES,
    CancelSerializer,
    CloneSerializer,
    ClusterEventSerializer,
    SweepTrialsSerializer,
    WorkloadCheckSerializer,
    WorkloadCreateSerializer,
    WorkloadEventSerializer,
    WorkloadEventsSerializer,
    WorkloadListQuerySerializer,
    WorkloadSerializer,
    workload_rows,
)
from apps.catalog.models import GpuClass, Image
from apps.common import streams
from apps.common.http import client_ip
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.reads import LogsUnavailable, workload_logs
from apps.orchestration.selectors import (
    archived_log,
    archived_log_lines,
    sweep_trials,
    workload_cluster_events,
    workload_log_download,
)
from apps.scheduling.services import (
    PreemptionVictim,
    confirmation_needed,
    request_dry_run,
    teammates_to_preempt,
)
from apps.workloads import idempotency as idem
from apps.workloads import rules
from apps.workloads.models import Workload
from apps.workloads.selectors import WorkloadFilters, WorkloadListing, workload_for_user
from apps.workloads.services import (
    workload_cancel,
    workload_clone,
    workload_delete,
    workload_resume,
    workload_submit,
    workload_suspend,
)

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (a UUID). A retried request with the same key and body returns the "
        "workload the first one created, with `Idempotent-Replayed: true`, instead of "
        "submitting twice. Keys are per user and kept 24 hours."
    ),
)

DRY_RUN_PARAMETER = OpenApiParameter(
    "dry_run",
    bool,
    description=(
        "true: submit nothing; answer 200 with what it would be recorded and charged as and "
        "the scheduler's verdict (starts now / would preempt / waits), as "
        "POST /api/v1/workloads/validate/ does; or the 400 a submission would get."
    ),
)


WORKLOAD_EXAMPLE = {
    "id": 42,
    "name": "resnet50-baseline",
    "kind": "training",
    "state": "queued",
    "team": "vision",
    "owner": "alice",
    "gpu_class": "H100-80GB",
    "image": "PyTorch training",
    "gpu_milli": 2000,
    "charged_milli": 2000,
    "replicas": 2,
    "total_milli": 4000,
    "priority_class": "training",
    "requeue_on_preemption": True,
    "command": ["torchrun", "train.py"],
    "args": ["--epochs", "90"],
    "env": {"WANDB_MODE": "offline"},
    "max_runtime_seconds": 86400,
    "idle_timeout_seconds": None,
    "retries": 1,
    "params": {},
    "sweep": None,
    "trial_index": None,
    "exit_code": None,
    "last_reason": "no H100-80GB free; 3 ahead of you",
    "queue_position": 4,
    "estimated_start_at": "2025-01-01T12:30:00Z",
    "created_at": "2025-01-01T12:00:00Z",
    "queued_at": "2025-01-01T12:00:01Z",
    "admitted_at": None,
    "started_at": None,
    "finished_at": None,
    "updated_at": "2025-01-01T12:00:01Z",
}

NOTEBOOK_SUSPENDED = {
    **WORKLOAD_EXAMPLE,
    "id": 17,
    "name": "explore",
    "kind": "notebook",
    "state": "suspended",
    "gpu_milli": 500,
    "charged_milli": 500,
    "replicas": 1,
    "total_milli": 500,
    "priority_class": "development",
    "command": [],
    "args": [],
    "idle_timeout_seconds": 3600,
    "last_reason": "Suspended by alice; your files are kept.",
    "queue_position": None,
    "estimated_start_at": None,
}


TRIALS_EXAMPLE = {
    "sweep": {
        **WORKLOAD_EXAMPLE,
        "id": 50,
        "name": "lr-sweep",
        "kind": "sweep",
        "state": "running",
        "gpu_milli": 250,
        "charged_milli": 250,
        "replicas": 2,
        "total_milli": 500,
        "priority_class": "batch",
        "params": {"grid": {"lr": ["0.1", "0.01"]}, "parallelism": 1},
        "last_reason": "1 of 2 trials running, 1 done, 0 waiting.",
        "queue_position": None,
        "estimated_start_at": None,
    },
    "parallelism": 1,
    "counts": {"succeeded": 1, "running": 1},
    "trials": [
        {
            "id": 51,
            "index": 0,
            "params": {"lr": "0.1"},
            "state": "succeeded",
            "exit_code": 0,
            "started_at": "2025-01-01T12:00:05Z",
            "finished_at": "2025-01-01T12:20:05Z",
            "runtime_seconds": 1200,
            "attempts": 1,
            "last_metrics_line": '{"epoch": 10, "loss": 0.31, "acc": 0.92}',
            "reason": "completed",
        },
        {
            "id": 52,
            "index": 1,
            "params": {"lr": "0.01"},
            "state": "running",
            "exit_code": None,
            "started_at": "2025-01-01T12:20:10Z",
            "finished_at": None,
            "runtime_seconds": 300,
            "attempts": 1,
            "last_metrics_line": None,
            "reason": "running",
        },
    ],
}


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


def _visible(request: Request, workload_id: int) -> Workload:
    return workload_for_user(_actor(request), workload_id)


def _conflict_on_state(exc: DjangoValidationError) -> Conflict:
    return Conflict(" ".join(exc.messages))


def _managed(
    request: Request,
    workload_id: int,
    action: Callable[..., Workload],
    body: type[serializers.Serializer] | None = None,
) -> Response:
    """Cancel, suspend or resume: 404 for another team's workload before the body is read;
    the service decides who may; a state that does not allow it is a 409."""
    workload = _visible(request, workload_id)
    extra: dict[str, Any] = {}
    if body is not None:
        parsed = body(data=request.data)
        parsed.is_valid(raise_exception=True)
        extra = dict(parsed.validated_data)
    try:
        workload = action(
            actor=_actor(request), workload=workload, source_ip=client_ip(request), **extra
        )
    except DjangoValidationError as exc:
        raise _conflict_on_state(exc) from exc
    return Response(WorkloadSerializer(workload).data)


# --- the preemption question ----------------------------------------------------------------


class WouldPreempt(Conflict):
    """Submitting now would preempt running work of the person's or their teammates'."""

    default_code = "would_preempt"

    def __init__(self, victims: list[PreemptionVictim]) -> None:
        names = "; ".join(v.describe() for v in victims)
        super().__init__(
            f"To start it now the scheduler would preempt: {names}. Submit again with "
            "confirm_preemption true to go ahead."
        )
        self.body_extra = {"would_preempt": _victims(victims)}


WOULD_PREEMPT_RESPONSE = OpenApiResponse(
    response=error_responses(409)[409].response,
    description=(
        "Starting it now would preempt running work of yours or your teammates; nothing was "
        "submitted. The body lists it in `would_preempt` (as the dry run's answer); submit "
        "again with `confirm_preemption: true` to go ahead."
    ),
    examples=[
        OpenApiExample(
            "would preempt",
            value={
                "code": "would_preempt",
                "message": "To start it now the scheduler would preempt: #12 notebook “big” "
                "(yours, 8 GPUs H100-80GB). Submit again with confirm_preemption true to go "
                "ahead.",
                "fields": {},
                "would_preempt": [
                    {
                        "id": 12,
                        "name": "big",
                        "kind": "notebook",
                        "owner": "alice",
                        "team": "vision",
                        "gpus": "8 GPUs H100-80GB",
                        "total_milli": 8000,
                        "yours": True,
                        "same_team": True,
                    }
                ],
            },
            response_only=True,
            status_codes=["409"],
        )
    ],
)


def _victims(victims: list[PreemptionVictim]) -> list[dict[str, Any]]:
    return [
        {
            "id": v.id,
            "name": v.name,
            "kind": v.kind,
            "owner": v.owner,
            "team": v.team,
            "gpus": v.gpus,
            "total_milli": v.total_milli,
            "yours": v.yours,
            "same_team": v.same_team,
        }
        for v in victims
    ]


def _preemption_guard(
    actor: User, team: Team, gpu_class: GpuClass, *, confirmed: bool
) -> Callable[[rules.WorkloadRequest, rules.Charge], None]:
    """Before a submission is written: the scheduler's dry run; 409 if it would preempt the
    person's or a teammate's running work and they have not confirmed."""

    def guard(request_: rules.WorkloadRequest, charge: rules.Charge) -> None:
        if confirmed:
            return
        victims = teammates_to_preempt(
            actor=actor, team=team, gpu_class=gpu_class, request=request_, charge=charge
        )
        if victims:
            raise WouldPreempt(victims)

    return guard


# --- list and submit -------------------------------------------------------------------------


class WorkloadListView(APIView):
    pagination_class = PagePagination

    @extend_schema(
        operation_id="workloads_list",
        summary="List workloads",
        description=(
            "Workloads of your teams (all of them for admins), newest first, in pages. "
            "Filters combine; `state` and `kind` take comma-separated values."
        ),
        parameters=[
            WorkloadListQuerySerializer,
            OpenApiParameter("page", int, description="Page number, from 1."),
            OpenApiParameter("page_size", int, description="Rows per page (default 50, max 200)."),
        ],
        responses={200: WorkloadSerializer(many=True), **error_responses(400, 404)},
        examples=[
            OpenApiExample(
                "a page",
                value={
                    "count": 1,
                    "next": None,
                    "previous": None,
                    "results": [WORKLOAD_EXAMPLE],
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        filters = WorkloadFilters()
        if request.query_params.keys() - {"page", "page_size"}:  # (most calls only page)
            query = WorkloadListQuerySerializer(data=request.query_params)
            query.is_valid(raise_exception=True)
            filters = query.filters()
        listing = WorkloadListing(_actor(request), filters, ROW_VALUES)
        paginator = self.pagination_class()
        expected = paginator.requested_slice(request)
        if expected is not None:
            listing.expect(offset=expected[0], limit=expected[1])
        values: list[dict[str, Any]] | None = paginator.paginate_queryset(
            listing,  # type: ignore[arg-type]  # sized and sliceable, as the paginator needs
            request,
            view=self,
        )
        assert values is not None  # the paginator always pages
        return paginator.get_paginated_response(workload_rows(values))

    @extend_schema(
        operation_id="workloads_create",
        summary="Submit a notebook, training job or sweep",
        description=(
            "Records the request; it waits as pending/queued until the scheduler admits it. "
            "Quota, priority-class and fraction rules are checked and reported per field."
        ),
        parameters=[IDEMPOTENCY_HEADER, DRY_RUN_PARAMETER],
        request=WorkloadCreateSerializer,
        responses={
            201: OpenApiResponse(WorkloadSerializer, description="Submitted (or replayed)."),
            200: OpenApiResponse(
                WorkloadCheckSerializer, description="dry_run=true: it would be accepted."
            ),
            **error_responses(400, 403, 413),
            409: WOULD_PREEMPT_RESPONSE,
            422: OpenApiResponse(
                response=error_responses(400)[400].response,
                description="The Idempotency-Key was used before with a different body.",
            ),
        },
        examples=[
            OpenApiExample(
                "notebook",
                value={
                    "kind": "notebook",
                    "name": "explore",
                    "team": "vision",
                    "gpu_class": "A100-80GB",
                    "image": "JupyterLab PyTorch",
                    "gpu_milli": 500,
                    "idle_timeout_seconds": 3600,
                },
                request_only=True,
            ),
            OpenApiExample(
                "training job on 2 nodes",
                value={
                    "kind": "training",
                    "name": "resnet50-baseline",
                    "team": "vision",
                    "gpu_class": "H100-80GB",
                    "image": "PyTorch training",
                    "gpu_milli": 2000,
                    "replicas": 2,
                    "command": ["torchrun", "train.py"],
                    "args": ["--epochs", "90"],
                    "env": {"WANDB_MODE": "offline"},
                    "max_runtime_seconds": 86400,
                    "retries": 1,
                },
                request_only=True,
            ),
            OpenApiExample(
                "sweep",
                value={
                    "kind": "sweep",
                    "name": "lr-sweep",
                    "gpu_class": "L40S-48GB",
                    "image": "PyTorch training",
                    "gpu_milli": 1000,
                    "command": ["python", "train.py"],
                    "grid": {"lr": ["0.1", "0.01"], "batch": ["32", "64"]},
                },
                request_only=True,
            ),
            OpenApiExample("submitted", value=WORKLOAD_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        if _dry_run_asked(request):
            return Response(_dry_run(request))
        actor = _actor(request)
        serializer, team, gpu_class, image = _parse_submission(request, actor)
        confirmed = serializer.validated_data["confirm_preemption"]

        def submit() -> Workload:
            return workload_submit(
                actor=actor,
                team=team,
                gpu_class=gpu_class,
                image=image,
                source_ip=client_ip(request),
                before_create=_preemption_guard(actor, team, gpu_class, confirmed=confirmed),
                **serializer.submit_kwargs(),
            )

        return _create(request, actor, "submit", serializer.validated_data, submit)


def _dry_run_asked(request: Request) -> bool:
    value = request.query_params.get("dry_run", "").strip().lower()
    if value in ("", "false", "0", "no"):
        return False
    if value in ("true", "1", "yes"):
        return True
    raise exceptions.ValidationError({"dry_run": "Say true or false."})


def _parse_submission(
    request: Request, actor: User
) -> tuple[WorkloadCreateSerializer, Team, GpuClass, Image]:
    """The body's shape and its names (team, class, image) looked up; the rules come after."""
    serializer = WorkloadCreateSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    errors: dict[str, str] = {}
    team = _team_for_submit(actor, data.get("team"), errors)
    gpu_class = GpuClass.objects.filter(name=data["gpu_class"]).first()
    if gpu_class is None:
        errors["gpu_class"] = "No such GPU class; GET /api/v1/gpu-classes/ lists them."
    image = Image.objects.filter(name=data["image"]).first()
    if image is None:
        errors["image"] = "No such image; GET /api/v1/images/ lists them."
    if errors or team is None or gpu_class is None or image is None:
        raise DjangoValidationError(errors)
    return serializer, team, gpu_class, image


class WorkloadValidateView(APIView):
    @extend_schema(
        operation_id="workloads_validate",
        summary="Check a request without submitting it (dry run)",
        description=(
            "Runs every rule a submission runs — the request's shape, your role's priority "
            "classes, the catalogue, the class's nodes and your team's quota — and answers what "
            "it would be recorded and charged as, or the same 400 (same fields, same messages) "
            "a submission would get. Nothing is recorded: a client such as the CLI checks a "
            "spec here without a copy of the rules. `would_preempt` is the scheduler's own dry "
            "run: the running workloads it would preempt to start the request now."
        ),
        request=WorkloadCreateSerializer,
        responses={
            200: OpenApiResponse(WorkloadCheckSerializer, description="It would be accepted."),
            **error_responses(400, 403, 413),
        },
        examples=[
            OpenApiExample(
                "sweep",
                value={
                    "kind": "sweep",
                    "name": "lr-sweep",
                    "gpu_class": "L40S-48GB",
                    "image": "PyTorch training",
                    "gpu_milli": 500,
                    "command": ["python", "train.py"],
                    "grid": {"lr": ["0.1", "0.01"], "batch": ["32", "64"]},
                },
                request_only=True,
            ),
            OpenApiExample(
                "would be accepted",
                value={
                    "valid": True,
                    "kind": "sweep",
                    "name": "lr-sweep",
                    "team": "vision",
                    "gpu_class": "L40S-48GB",
                    "image": "PyTorch training",
                    "gpu_milli": 500,
                    "charged_milli": 500,
                    "replicas": 4,
                    "total_milli": 2000,
                    "priority_class": "batch",
                    "hourly_cost": "1.60",
                    "currency": "EUR",
                    "would_preempt": [],
                    "confirmation_needed": False,
                    "verdict": {
                        "outcome": "waits",
                        "headline": "Waits: #3, about 40 min, because no L40S-48GB capacity "
                        "free for 0.5 GPU; 2 ahead of you.",
                        "reason": "No L40S-48GB capacity free for 0.5 GPU; 2 ahead of you.",
                        "nodes": [],
                        "cluster": None,
                        "borrowed": False,
                        "queue_position": 3,
                        "estimated_start_at": "2025-01-01T12:40:00Z",
                        "estimated_wait_seconds": 2400,
                        "advice": ["0.25 GPU of A100-80GB-MIG would start now."],
                    },
                },
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        return Response(_dry_run(request))


def _dry_run(request: Request) -> dict[str, Any]:
    """The rules, then the scheduler's dry run: what the request would be recorded and
    charged as, and whether it would start now, preempt or wait. Nothing is recorded."""
    actor = _actor(request)
    serializer, team, gpu_class, image = _parse_submission(request, actor)
    request_ = serializer.request()
    dry = request_dry_run(
        actor=actor, team=team, gpu_class=gpu_class, image=image, request=request_
    )
    charge, answer = dry.charge, dry.answer
    body: dict[str, Any] = {
        "valid": True,
        "kind": request_.kind,
        "name": request_.name,
        "team": team.slug,
        "gpu_class": gpu_class.name,
        "image": image.name,
        "gpu_milli": charge.gpu_milli,
        "charged_milli": charge.charged_milli,
        "replicas": charge.replicas,
        "total_milli": charge.total_milli,
        "priority_class": charge.priority_class,
    }
    body["hourly_cost"] = dry.hourly_cost
    body["currency"] = settings.PLATFORM_CURRENCY
    body["would_preempt"] = _victims(answer.victims)
    body["confirmation_needed"] = confirmation_needed(answer.victims)
    body["verdict"] = answer.as_dict()
    return dict(WorkloadCheckSerializer(body).data)


def _team_for_submit(actor: User, slug: str | None, errors: dict[str, str]) -> Team | None:
    mine = list(teams_of(actor))
    if slug is None:
        if len(mine) == 1:
            return mine[0]
        errors["team"] = (
            f"Say which team: you are in {', '.join(t.slug for t in mine)}."
            if mine
            else "You are not in any team; ask your platform team to add you."
        )
        return None
    team = next((t for t in mine if t.slug == slug), None)
    if team is None and actor.is_staff:
        team = Team.objects.filter(slug=slug).first()
    if team is None:
        errors["team"] = f"You are not a member of a team “{slug}”."
    return team


def _create(
    request: Request, actor: User, purpose: str, payload: Any, create: Callable[[], Workload]
) -> Response:
    """Create through ``create`` once per Idempotency-Key (or every time without one)."""
    key = request.headers.get("Idempotency-Key")
    replayed = False
    if key is None:
        workload = create()
    else:
        problem = idem.key_problem(key)
        if problem:
            raise DjangoValidationError({"Idempotency-Key": problem})
        try:
            workload, replayed = idem.workload_create_once(
                actor=actor,
                key=key,
                fingerprint=idem.request_fingerprint(purpose, payload),
                create=create,
            )
        except idem.IdempotencyKeyReused as exc:
            raise IdempotencyMismatch(str(exc)) from exc
    workload = workload_for_user(actor, workload.pk)
    response = Response(WorkloadSerializer(workload).data, status=status.HTTP_201_CREATED)
    response["Location"] = f"/api/v1/workloads/{workload.pk}/"
    if key is not None:
        response["Idempotent-Replayed"] = "true" if replayed else "false"
    return response


class IdempotencyMismatch(exceptions.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "idempotency_key_reused"
    default_detail = "This Idempotency-Key was already used for a different request."


# --- one workload ----------------------------------------------------------------------------


class WorkloadDetailView(APIView):
    @extend_schema(
        operation_id="workloads_retrieve",
        summary="One workload",
        responses={200: WorkloadSerializer, **error_responses(404)},
        examples=[OpenApiExample("queued job", value=WORKLOAD_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        return Response(WorkloadSerializer(_visible(request, workload_id)).data)

    @extend_schema(
        operation_id="workloads_destroy",
        summary="Delete a workload",
        description=(
            "Owner, team lead or admin. A workload that still runs is cancelled first and its "
            "Kubernetes objects are removed; it disappears from every list. Its GPU-hours stay "
            "in the accounting and the audit trail."
        ),
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, workload_id: int) -> Response:
        workload = _visible(request, workload_id)
        workload_delete(actor=_actor(request), workload=workload, source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WorkloadTrialsView(APIView):
    @extend_schema(
        operation_id="workloads_trials",
        summary="A sweep's trials",
        description=(
            "Every trial of a sweep in grid order: its parameters, state, exit code, runtime, "
            "attempts and the last metrics line it printed (JSON or key=value pairs; read from "
            "the log archived when the trial ended), with the sweep's own state. Each trial is "
            "a workload of its own (its logs and events are under its id)."
        ),
        responses={200: SweepTrialsSerializer, **error_responses(404)},
        examples=[OpenApiExample("a sweep half done", value=TRIALS_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        sweep = _visible(request, workload_id)
        if not sweep.is_sweep:
            raise exceptions.NotFound("Only a sweep has trials.")
        trials = sweep_trials(sweep)
        counts: dict[str, int] = {}
        for t in trials:
            counts[t.state] = counts.get(t.state, 0) + 1
        body = {
            "sweep": WorkloadSerializer(sweep).data,
            "parallelism": (sweep.params or {}).get("parallelism"),
            "counts": counts,
            "trials": [vars(t) for t in trials],
        }
        return Response(SweepTrialsSerializer(body).data)


_ACTION_ERRORS = error_responses(403, 404, 409)


class WorkloadCancelView(APIView):
    @extend_schema(
        operation_id="workloads_cancel",
        summary="Cancel a workload",
        description="Owner, team lead or admin. Its Kubernetes objects are removed.",
        request=CancelSerializer,
        responses={200: WorkloadSerializer, **_ACTION_ERRORS, **error_responses(400)},
        examples=[
            OpenApiExample("with a reason", value={"reason": "wrong dataset"}, request_only=True),
            OpenApiExample(
                "cancelled",
                value={**WORKLOAD_EXAMPLE, "state": "cancelled", "last_reason": "wrong dataset"},
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        return _managed(request, workload_id, workload_cancel, body=CancelSerializer)


class WorkloadSuspendView(APIView):
    @extend_schema(
        operation_id="workloads_suspend",
        summary="Suspend a notebook",
        description="Stops a running notebook and keeps its files; resume it later.",
        request=None,
        responses={200: WorkloadSerializer, **_ACTION_ERRORS},
        examples=[OpenApiExample("suspended", value=NOTEBOOK_SUSPENDED, response_only=True)],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        return _managed(request, workload_id, workload_suspend)


class WorkloadResumeView(APIView):
    @extend_schema(
        operation_id="workloads_resume",
        summary="Resume a suspended notebook",
        description="Queues it again; it starts when the scheduler finds a GPU.",
        request=None,
        responses={200: WorkloadSerializer, **_ACTION_ERRORS},
        examples=[
            OpenApiExample(
                "queued again",
                value={
                    **NOTEBOOK_SUSPENDED,
                    "state": "queued",
                    "last_reason": "Resumed by alice; waiting for a GPU.",
                },
                response_only=True,
            )
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        return _managed(request, workload_id, workload_resume)


class WorkloadCloneView(APIView):
    @extend_schema(
        operation_id="workloads_clone",
        summary="Submit a copy of a workload",
        description=(
            "Same request under a new name; quota rules apply again. Like a submission, it is "
            "answered 409 with `would_preempt` if starting it would preempt running work of "
            "yours or your teammates, unless `confirm_preemption` is true."
        ),
        parameters=[IDEMPOTENCY_HEADER],
        request=CloneSerializer,
        responses={
            201: WorkloadSerializer,
            **error_responses(400, 403, 404),
            409: WOULD_PREEMPT_RESPONSE,
        },
        examples=[
            OpenApiExample("rename", value={"name": "resnet50-rerun"}, request_only=True),
            OpenApiExample(
                "the copy",
                value={**WORKLOAD_EXAMPLE, "id": 43, "name": "resnet50-rerun", "state": "pending"},
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        actor = _actor(request)
        workload = _visible(request, workload_id)
        body = CloneSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        name = body.validated_data.get("name")
        guard = _preemption_guard(
            actor,
            workload.team,
            workload.gpu_class,
            confirmed=body.validated_data["confirm_preemption"],
        )

        def clone() -> Workload:
            return workload_clone(
                actor=actor,
                workload=workload,
                name=name,
                source_ip=client_ip(request),
                before_create=guard,
            )

        return _create(request, actor, f"clone:{workload.pk}", {"name": name}, clone)


# --- logs and events -------------------------------------------------------------------------


class PlainTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, dict) and "message" in data:
            return f"{data.get('code', 'error')}: {data['message']}\n".encode()
        return str(data).encode()


class LogsQuerySerializer(serializers.Serializer):
    tail = serializers.IntegerField(min_value=1, max_value=10_000, default=200)
    follow = serializers.BooleanField(default=False)
    replica = serializers.IntegerField(min_value=0, max_value=10_000, default=0)
    attempt = serializers.IntegerField(
        min_value=1,
        max_value=10_000,
        required=False,
        help_text="An archived attempt of the replica (1 = its first pod); default: the latest.",
    )
    download = serializers.BooleanField(
        default=False,
        help_text="The whole kept log as a file (ignores tail and follow).",
    )


class WorkloadLogsView(APIView):
    renderer_classes = [FastJSONRenderer, PlainTextRenderer]

    @extend_schema(
        operation_id="workloads_logs",
        summary="Container logs",
        description=(
            "The last `tail` lines of one replica's main container, as plain text with "
            "timestamps. With `follow=true` the response streams new lines until the "
            "container stops or the client disconnects. Once a workload has ended and its "
            "objects are gone, the lines come from the archive (the end of each replica's log "
            "per attempt, kept for a set number of days); `attempt` picks an earlier attempt. "
            "`download=true` answers the whole kept log as an attachment. 409 when there are "
            "no logs to show (not placed yet, no pod, nothing kept) or the cluster refuses them "
            "(container not started); 503 when the cluster is unreachable."
        ),
        parameters=[LogsQuerySerializer],
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                examples=[
                    OpenApiExample(
                        "lines",
                        value="2025-01-01T12:00:05Z epoch 1/90 loss=2.31\n",
                        response_only=True,
                    )
                ],
            ),
            **error_responses(400, 404, 409, 422, 503),
        },
    )
    def get(self, request: Request, workload_id: int) -> StreamingHttpResponse:
        workload = _visible(request, workload_id)
        query = LogsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        opts = query.validated_data
        which = {"workload": workload, "replica": opts["replica"], "attempt": opts.get("attempt")}
        try:
            if opts["download"]:
                filename, whole = workload_log_download(**which)
                response = StreamingHttpResponse(
                    (f"{line}\n" for line in whole), content_type="text/plain; charset=utf-8"
                )
                response["Content-Disposition"] = f'attachment; filename="{filename}"'
                response["Cache-Control"] = "no-store"
                return response
            row = archived_log(**which)
            if row is not None:
                lines: Iterator[str] = iter(archived_log_lines(row, tail_lines=opts["tail"]))
            else:
                lines = workload_logs(
                    workload=workload,
                    tail_lines=opts["tail"],
                    follow=opts["follow"],
                    replica=opts["replica"],
                )
                if streams.is_asgi(request):
                    return self._served_async(request, lines)
            # The generator talks to the cluster on its first step: take it here, so that "no
            # logs" is a 409 and a cluster error its answer (base.exception_handler), with the
            # error shape, rather than a broken 200 stream.
            first = list(_take_one(lines))
        except LogsUnavailable as exc:
            raise Conflict(str(exc), code="logs_unavailable") from exc
        response = StreamingHttpResponse(
            (f"{line}\n" for line in chain(first, _until_unavailable(lines))),
            content_type="text/plain; charset=utf-8",
        )
        response["Cache-Control"] = "no-store"
        response["X-Accel-Buffering"] = "no"  # let proxies pass followed lines at once
        return response

    def _served_async(self, request: Request, lines: Iterator[str]) -> StreamingHttpResponse:
        """Under ASGI the lines are read off the view's thread and the first one (or the
        error that makes the answer a 409 or 503) is awaited on the event loop
        (apps/common/streams.py); each user holds at most STREAMS_PER_USER streams."""
        slot = streams.Slot.claim(request.user.pk)
        if slot is None:
            raise TooManyStreams(streams.too_many_message())

        def on_error(exc: Exception) -> Response:
            if isinstance(exc, LogsUnavailable):
                exc = Conflict(str(exc), code="logs_unavailable")
            return self.finalize_response(request, self.handle_exception(exc))

        return streams.PendingStream(lines, render=_stream_chunk, on_error=on_error, slot=slot)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        return streams.opens_streams(super().as_view(**initkwargs))


class TooManyStreams(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_streams"


def _stream_chunk(kind: str, value: Any) -> str | None:
    """An item of the threaded reader as plain text: the same lines as the synchronous
    path, with a cluster failure mid-stream as its last line."""
    if kind == "line":
        return f"{value}\n"
    if kind == "error":
        if isinstance(value, LogsUnavailable):
            return f"[gpupaas] log stream ended: {value}\n"
        if isinstance(value, ClusterError):
            return f"[gpupaas] log stream ended: {cluster_error_answer(value).message}\n"
        raise value
    return None


def _take_one(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        yield line
        return


def _until_unavailable(lines: Iterator[str]) -> Iterator[str]:
    """The rest of the stream; a cluster failure mid-stream ends it with a last line."""
    try:
        yield from lines
    except LogsUnavailable as exc:
        yield f"[gpupaas] log stream ended: {exc}"
    except ClusterError as exc:
        yield f"[gpupaas] log stream ended: {cluster_error_answer(exc).message}"


class WorkloadEventsView(APIView):
    @extend_schema(
        operation_id="workloads_events",
        summary="State changes and Kubernetes events",
        description=(
            "The workload's state changes with their reasons, and its Kubernetes events: the "
            "cluster's while its objects exist, the archived ones after it has ended."
        ),
        responses={200: WorkloadEventsSerializer, **error_responses(404)},
        examples=[
            OpenApiExample(
                "events",
                value={
                    "events": [
                        {
                            "created_at": "2025-01-01T12:00:00Z",
                            "from_state": "",
                            "to_state": "pending",
                            "reason": "Submitted.",
                            "actor": "alice",
                        }
                    ],
                    "cluster_events": [
                        {
                            "time": "2025-01-01T12:01:00Z",
                            "type": "Normal",
                            "reason": "Scheduled",
                            "message": "Successfully assigned team-vision/wl-42-0 to gpu-node-1",
                            "object": "Pod/wl-42-0",
                            "count": 1,
                        }
                    ],
                    "cluster_events_unavailable": None,
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        workload = _visible(request, workload_id)
        events = workload.events.select_related("actor").order_by("created_at", "id")
        cluster_events: list[Any] = []
        unavailable: str | None = None
        try:
            # The cluster's while the objects exist, the archived ones after.
            cluster_events = workload_cluster_events(workload=workload).events
        except LogsUnavailable as exc:
            unavailable = str(exc)
        except ClusterError as exc:
            unavailable = cluster_error_answer(exc).message
        return Response(
            {
                "events": WorkloadEventSerializer(events, many=True).data,
                "cluster_events": ClusterEventSerializer(cluster_events, many=True).data,
                "cluster_events_unavailable": unavailable,
            }
        )
