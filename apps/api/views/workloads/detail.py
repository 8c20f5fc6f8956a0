"""One workload over the API: read or delete it, and a sweep's trials."""

from __future__ import annotations

from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
)
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.base import error_responses
from apps.api.serializers import (
    SweepTrialsSerializer,
    WorkloadSerializer,
)
from apps.api.views.workloads.common import _actor, _visible
from apps.api.views.workloads.openapi import TRIALS_EXAMPLE, WORKLOAD_EXAMPLE
from apps.common.http import client_ip
from apps.orchestration.selectors import (
    sweep_trials,
)
from apps.workloads.services import (
    workload_delete,
)


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
            "attempts, the command it runs and the last metrics line it printed (JSON or "
            "key=value pairs; while it runs, the latest read from its pod's log every "
            "ORCHESTRATION_TRIAL_METRICS_SECONDS; once it ended, from its archived log), with "
            "the sweep's own state. Each trial is a workload of its own (its logs and events "
            "are under its id)."
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
