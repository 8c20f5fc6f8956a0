"""GPU usage over the REST API: allocated and used GPU-hours and their cost, from the daily
accounting rollup (``UsageDay``), per month."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.accounts.roles import Act
from apps.accounts.selectors import team_for_user
from apps.api.base import error_responses
from apps.api.params import MonthField
from apps.telemetry import selectors


class UsageQuerySerializer(serializers.Serializer):
    month = MonthField(required=False, help_text="YYYY-MM; default: this month.")


class UsageRowSerializer(serializers.Serializer):
    team = serializers.CharField()
    owner = serializers.CharField()
    gpu_class = serializers.CharField()
    allocated_gpu_hours = serializers.FloatField()
    used_gpu_hours = serializers.FloatField()
    utilisation = serializers.FloatField(
        allow_null=True, help_text="used ÷ measured; null: no data"
    )
    cost = serializers.DecimalField(max_digits=16, decimal_places=2, coerce_to_string=True)


class UsageSerializer(serializers.Serializer):
    start = serializers.DateField(help_text="First day, inclusive.")
    end = serializers.DateField(help_text="Day after the last, exclusive.")
    currency = serializers.CharField(help_text="Of every cost (the platform's currency).")
    rows = UsageRowSerializer(many=True)


USAGE_EXAMPLE = {
    "start": "2025-01-01",
    "end": "2025-02-01",
    "currency": "EUR",
    "rows": [
        {
            "team": "Vision",
            "owner": "alice",
            "gpu_class": "H100-80GB",
            "allocated_gpu_hours": 312.5,
            "used_gpu_hours": 201.0,
            "utilisation": 0.643,
            "cost": "1406.25",
        }
    ],
}
GROUP = ("team__name", "owner__username", "gpu_class__name")


def _usage(rows: Any, start: date, end: date) -> dict[str, Any]:
    totals = selectors.usage_totals(rows, GROUP, start, end)
    return {
        "start": start,
        "end": end,
        "currency": settings.PLATFORM_CURRENCY,
        "rows": [
            {
                "team": t.team,
                "owner": t.label,
                "gpu_class": t.gpu_class,
                "allocated_gpu_hours": round(t.allocated_hours, 3),
                "used_gpu_hours": round(t.used_hours, 3),
                "utilisation": None if t.utilisation is None else round(t.utilisation, 3),
                "cost": t.cost,
            }
            for t in totals
        ],
    }


def _month(request: Request) -> tuple[date, date]:
    query = UsageQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return selectors.month_bounds(query.validated_data.get("month"))


class MyUsageView(APIView):
    @extend_schema(
        operation_id="usage_mine",
        summary="My GPU usage in a month",
        description="GPU-hours allocated and used, and their cost, per team and GPU class.",
        parameters=[UsageQuerySerializer],
        responses={200: UsageSerializer, **error_responses()},
        examples=[OpenApiExample("a month", value=USAGE_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        user: User = request.user  # type: ignore[assignment]
        start, end = _month(request)
        return Response(UsageSerializer(_usage(selectors.user_rows(user), start, end)).data)


class TeamUsageView(APIView):
    @extend_schema(
        operation_id="teams_usage",
        summary="A team's GPU usage in a month",
        description="Per member and GPU class: GPU-hours allocated and used, and their cost.",
        parameters=[UsageQuerySerializer],
        responses={200: UsageSerializer, **error_responses(404)},
        examples=[OpenApiExample("a month", value=USAGE_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        # Billing reads every team's usage, as auditors and admins do.
        team = team_for_user(request.user, slug, act=Act.SEE_SPEND)  # type: ignore[arg-type]
        start, end = _month(request)
        return Response(UsageSerializer(_usage(selectors.team_rows(team), start, end)).data)
