"""Inference endpoints in the API: their overview (URL, replicas over time, load, keys, cost),
scaling, waking, rolling updates and keys. Another team's endpoint is a 404, as everywhere."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.api.base import Conflict, error_responses
from apps.api.serializers import WorkloadSerializer
from apps.catalog.models import Image
from apps.common.http import client_ip
from apps.serving.access import endpoint_key_create, endpoint_key_revoke
from apps.serving.models import EndpointKey
from apps.serving.selectors import EndpointOverview, endpoint_overview
from apps.serving.services import endpoint_scale, endpoint_update, endpoint_wake
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user

ENDPOINT_EXAMPLE: dict[str, Any] = {
    "id": 57,
    "name": "support-llm",
    "kind": "inference",
    "state": "running",
    "team": "vision",
    "owner": "alice",
    "gpu_class": "H100-80GB",
    "image": "vLLM server",
    "gpu_milli": 1000,
    "charged_milli": 1000,
    "replicas": 2,
    "total_milli": 2000,
    "priority_class": "production",
    "last_reason": "2 of 2 replicas ready",
    "params": {
        "endpoint": {
            "port": 8000,
            "health_path": "/health",
            "min_replicas": 1,
            "max_replicas": 4,
            "target_replicas": 2,
            "model_path": "/team/models/llama-3-8b",
            "scale_metric": "rps",
            "scale_target": 10.0,
            "revision": 1,
        }
    },
}
KEY_EXAMPLE: dict[str, Any] = {
    "id": 3,
    "name": "support bot",
    "prefix": "gpe_1a2b3c4d_",
    "created_by": "alice",
    "created_at": "2026-11-30T10:00:00Z",
    "last_used_at": None,
    "revoked_at": None,
}
OVERVIEW_EXAMPLE: dict[str, Any] = {
    "workload": ENDPOINT_EXAMPLE,
    "url": "https://serve.gpu.example.com/endpoints/team-vision/57/",
    "service": "wl-57.team-vision.svc:80",
    "replicas": 2,
    "target": 3,
    "min_replicas": 1,
    "max_replicas": 4,
    "status": "2 of 2 replicas ready; 1 more replica(s) wait: Endpoints run only on "
    "guaranteed quota: vision uses 2 of its 2 GPU guarantee on H100-80GB, and this needs 1 "
    "more.",
    "scale_waiting": "Production work runs only on guaranteed quota: …",
    "rollout": {"revision": 1, "state": "complete"},
    "settings": ENDPOINT_EXAMPLE["params"]["endpoint"],
    "cost_per_hour": "9.00",
    "currency": "EUR",
    "keys": [KEY_EXAMPLE],
    "samples": [
        {
            "at": "2026-11-30T10:05:00Z",
            "replicas": 2,
            "target": 3,
            "requests_per_second": 27.5,
            "latency_p95_seconds": 0.21,
            "gpu_utilisation": 71.0,
            "decision": "27.5 requests/s for a target of 10 per replica: 2 → 3 replicas",
        }
    ],
}


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


def _endpoint(request: Request, workload_id: int) -> Workload:
    workload = workload_for_user(_actor(request), workload_id)
    if workload.kind != wl.KIND_INFERENCE:
        raise exceptions.NotFound("Only an inference endpoint has this.")
    return workload


class EndpointKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's start, to tell keys apart.")
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)


def _key(key: EndpointKey) -> dict[str, Any]:
    return {
        "id": key.pk,
        "name": key.name,
        "prefix": f"gpe_{key.lookup}_",
        "created_by": key.created_by.get_username() if key.created_by else None,
        "created_at": key.created_at,
        "last_used_at": key.last_used_at,
        "revoked_at": key.revoked_at,
    }


class EndpointSampleSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    replicas = serializers.IntegerField()
    target = serializers.IntegerField()
    requests_per_second = serializers.FloatField(allow_null=True)
    latency_p95_seconds = serializers.FloatField(allow_null=True)
    gpu_utilisation = serializers.FloatField(allow_null=True)
    decision = serializers.CharField()


class EndpointOverviewSerializer(serializers.Serializer):
    workload = WorkloadSerializer()
    url = serializers.CharField(help_text="Through the ingress; empty: inside the cluster only.")
    service = serializers.CharField(help_text="The in-cluster address.")
    replicas = serializers.IntegerField(help_text="Replicas it holds now.")
    target = serializers.IntegerField(help_text="Replicas it is asked to run.")
    min_replicas = serializers.IntegerField()
    max_replicas = serializers.IntegerField()
    status = serializers.CharField()
    scale_waiting = serializers.CharField(help_text="Why more replicas wait, if they do.")
    rollout = serializers.DictField()
    settings = serializers.DictField()
    cost_per_hour = serializers.DecimalField(max_digits=12, decimal_places=2)
    currency = serializers.CharField(help_text="Of cost_per_hour (the platform's currency).")
    keys = EndpointKeySerializer(many=True)
    samples = EndpointSampleSerializer(many=True, help_text="Replicas over time against load.")


def _overview(o: EndpointOverview) -> dict[str, Any]:
    return {
        "workload": o.workload,
        "url": o.url,
        "service": o.service,
        "replicas": o.replicas,
        "target": o.target,
        "min_replicas": o.min_replicas,
        "max_replicas": o.max_replicas,
        "status": o.status,
        "scale_waiting": o.scale_waiting,
        "rollout": o.rollout,
        "settings": o.settings,
        "cost_per_hour": o.cost_per_hour,
        "currency": settings.PLATFORM_CURRENCY,
        "keys": [_key(k) for k in o.keys],
        "samples": [
            {
                "at": s.at,
                "replicas": s.replicas,
                "target": s.target,
                "requests_per_second": s.requests_per_second,
                "latency_p95_seconds": s.latency_p95_seconds,
                "gpu_utilisation": s.gpu_utilisation,
                "decision": s.decision,
            }
            for s in o.samples
        ],
    }


class EndpointView(APIView):
    @extend_schema(
        operation_id="endpoints_retrieve",
        summary="An inference endpoint",
        description="Its URL, replicas held and asked for, why more wait, its rollout, keys "
        "(never their values), replicas over time against requests/s, latency and GPU "
        "utilisation, and its cost per hour. Logs and events: the workload's own routes.",
        responses={200: EndpointOverviewSerializer, **error_responses(404)},
        examples=[OpenApiExample("running", value=OVERVIEW_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        overview = endpoint_overview(_endpoint(request, workload_id))
        return Response(EndpointOverviewSerializer(_overview(overview)).data)


class ScaleSerializer(serializers.Serializer):
    replicas = serializers.JSONField(help_text="Between the endpoint's minimum and maximum.")


class EndpointScaleView(APIView):
    @extend_schema(
        operation_id="endpoints_scale",
        summary="Scale an endpoint",
        description="Owner, team lead or admin. Fewer replicas go at once; more wait in the "
        "queue, each admitted on the team's guarantee (the endpoint says why they wait). 0 "
        "scales to zero where the endpoint may.",
        request=ScaleSerializer,
        responses={200: WorkloadSerializer, **error_responses(403, 404)},
        examples=[
            OpenApiExample("three replicas", value={"replicas": 3}, request_only=True),
            OpenApiExample("asked", value=ENDPOINT_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        workload = _endpoint(request, workload_id)
        body = ScaleSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workload = endpoint_scale(
            actor=_actor(request),
            workload=workload,
            replicas=body.validated_data["replicas"],
            source_ip=client_ip(request),
        )
        return Response(WorkloadSerializer(workload).data)


class EndpointWakeView(APIView):
    @extend_schema(
        operation_id="endpoints_wake",
        summary="Wake an endpoint scaled to zero",
        request=None,
        responses={200: WorkloadSerializer, **error_responses(403, 404, 409)},
        examples=[
            OpenApiExample(
                "queued", value={**ENDPOINT_EXAMPLE, "state": "queued"}, response_only=True
            )
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        workload = _endpoint(request, workload_id)
        if not endpoint_wake(
            actor=_actor(request), workload=workload, source_ip=client_ip(request)
        ):
            raise Conflict(f"The endpoint is {workload.state}, not scaled to zero.")
        workload.refresh_from_db()
        return Response(WorkloadSerializer(workload).data)


class RolloutSerializer(serializers.Serializer):
    image = serializers.CharField(required=False, max_length=100, help_text="A serving image.")
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), required=False
    )
    model_path = serializers.JSONField(required=False)
    model_uri = serializers.JSONField(required=False)
    model_secret = serializers.JSONField(required=False)


class EndpointRolloutView(APIView):
    @extend_schema(
        operation_id="endpoints_rollout",
        summary="Roll out a new image, model or environment",
        description="Without downtime: a new replica starts and must stay ready before an old "
        "one stops. If the new replicas are not ready within the progress deadline the previous "
        "revision is put back by itself. Progress: GET …/endpoint/ (rollout).",
        request=RolloutSerializer,
        responses={200: WorkloadSerializer, **error_responses(403, 404, 409)},
        examples=[
            OpenApiExample(
                "a new model",
                value={"model_path": "/team/models/llama-3-8b-v2", "env": {"DTYPE": "bf16"}},
                request_only=True,
            ),
            OpenApiExample("rolling out", value=ENDPOINT_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        workload = _endpoint(request, workload_id)
        body = RolloutSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        image = None
        if "image" in data:
            image = Image.objects.filter(name=data.pop("image")).first()
            if image is None:
                raise DjangoValidationError({"image": "No such image; GET /api/v1/images/."})
        for key in ("model_path", "model_uri", "model_secret"):
            if key in data and not isinstance(data[key], str):
                raise DjangoValidationError({key: "Give it as text."})
        try:
            workload = endpoint_update(
                actor=_actor(request),
                workload=workload,
                image=image,
                source_ip=client_ip(request),
                **data,
            )
        except DjangoValidationError as exc:
            if hasattr(exc, "error_dict"):
                raise
            raise Conflict(" ".join(exc.messages)) from exc
        return Response(WorkloadSerializer(workload).data)


class KeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, help_text="What calls with it.")


class EndpointKeysView(APIView):
    @extend_schema(
        operation_id="endpoints_keys_list",
        summary="An endpoint's keys",
        responses={200: EndpointKeySerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("one key", value=[KEY_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        overview = endpoint_overview(_endpoint(request, workload_id), history=0)
        return Response([_key(k) for k in overview.keys])

    @extend_schema(
        operation_id="endpoints_keys_create",
        summary="Create a key",
        description="Owner, team lead or admin. The key is in this answer (`key`) and never "
        "again: only its hash is kept. Call the endpoint with `Authorization: Bearer <key>`.",
        request=KeyCreateSerializer,
        responses={201: EndpointKeySerializer, **error_responses(403, 404)},
        examples=[
            OpenApiExample("a key", value={"name": "support bot"}, request_only=True),
            OpenApiExample(
                "created (shown once)",
                value={**KEY_EXAMPLE, "key": "gpe_1a2b3c4d_…"},
                response_only=True,
                status_codes=["201"],
            ),
        ],
    )
    def post(self, request: Request, workload_id: int) -> Response:
        workload = _endpoint(request, workload_id)
        body = KeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        created = endpoint_key_create(
            actor=_actor(request),
            workload=workload,
            name=body.validated_data["name"],
            source_ip=client_ip(request),
        )
        return Response(
            {**_key(created.key), "key": created.plaintext}, status=status.HTTP_201_CREATED
        )


class EndpointKeyDetailView(APIView):
    @extend_schema(
        operation_id="endpoints_keys_revoke",
        summary="Revoke a key",
        description="Calls with it are refused from now on.",
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, workload_id: int, key_id: int) -> Response:
        workload = _endpoint(request, workload_id)
        try:
            endpoint_key_revoke(
                actor=_actor(request),
                workload=workload,
                key_id=key_id,
                source_ip=client_ip(request),
            )
        except EndpointKey.DoesNotExist as exc:
            raise exceptions.NotFound("No such key for this endpoint.") from exc
        return Response(status=status.HTTP_204_NO_CONTENT)
