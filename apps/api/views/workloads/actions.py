"""A workload's actions over the API: cancel, suspend and resume (the services decide who may; a
state that does not allow it is a 409)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.base import error_responses
from apps.api.serializers import (
    CancelSerializer,
    WorkloadSerializer,
)
from apps.api.views.workloads.common import _actor, _conflict_on_state, _visible
from apps.api.views.workloads.openapi import NOTEBOOK_SUSPENDED, WORKLOAD_EXAMPLE
from apps.common.http import client_ip
from apps.workloads.models import Workload
from apps.workloads.services import (
    workload_cancel,
    workload_resume,
    workload_suspend,
)


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
