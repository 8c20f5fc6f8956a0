"""Listing and submitting workloads over the API: the list (filters, pages), a submission
(idempotent with ``Idempotency-Key``), its dry run and validation, and a clone (a copy under a
new name, submitted the same way). One rule set decides, whatever the door."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, teams_of
from apps.api.base import PagePagination, error_responses
from apps.api.serializers import (
    ROW_VALUES,
    CloneSerializer,
    WorkloadCheckSerializer,
    WorkloadCreateSerializer,
    WorkloadListQuerySerializer,
    WorkloadSerializer,
    workload_rows,
)
from apps.api.views.workloads.common import _actor, _visible
from apps.api.views.workloads.openapi import DRY_RUN_PARAMETER, IDEMPOTENCY_HEADER, WORKLOAD_EXAMPLE
from apps.api.views.workloads.preemption import WOULD_PREEMPT_RESPONSE, _preemption_guard, _victims
from apps.catalog.models import GpuClass, Image
from apps.common.http import client_ip
from apps.scheduling.services import (
    confirmation_needed,
    request_dry_run,
)
from apps.workloads import idempotency as idem
from apps.workloads.models import Workload
from apps.workloads.selectors import WorkloadFilters, WorkloadListing, workload_for_user
from apps.workloads.services import (
    workload_clone,
    workload_submit,
)
from apps.workloads.sizing import at_once_milli


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
                request=serializer.request(),
                source_ip=client_ip(request),
                before_create=_preemption_guard(actor, team, gpu_class, confirmed=confirmed),
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
        "parallelism": charge.parallelism,
        "at_once_milli": at_once_milli(charge.charged_milli, charge.replicas, charge.parallelism),
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
    if team is None and platform_may(actor, Act.ACT_FOR_TEAMS):
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
