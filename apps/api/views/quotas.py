"""Team quotas and what is used of them, over the REST API."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.accounts.selectors import team_for_user, teams_visible_to
from apps.api.base import error_responses
from apps.workloads.selectors import QuotaUsage, quota_usage_for_teams


class QuotaUsageSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    gpu_class = serializers.CharField(source="gpu_class.name")
    guaranteed_milli = serializers.IntegerField()
    limit_milli = serializers.IntegerField()
    used_milli = serializers.IntegerField(help_text="Held by admitted, starting, running work.")
    borrowed_milli = serializers.IntegerField(help_text="Used above the guarantee: reclaimable.")
    free_milli = serializers.SerializerMethodField(help_text="Left before the limit.")

    def get_free_milli(self, usage: QuotaUsage) -> int:
        return max(0, usage.limit_milli - usage.used_milli)


QUOTA_EXAMPLE = {
    "team": "vision",
    "gpu_class": "H100-80GB",
    "guaranteed_milli": 4000,
    "limit_milli": 8000,
    "used_milli": 5500,
    "borrowed_milli": 1500,
    "free_milli": 2500,
}


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


class QuotaListView(APIView):
    @extend_schema(
        operation_id="quotas_list",
        summary="Quotas and usage of my teams",
        description="One row per team and GPU class, in milli-GPU (1000 = one GPU).",
        parameters=[OpenApiParameter("team", str, description="Only this team (its slug).")],
        responses={200: QuotaUsageSerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("usage", value=[QUOTA_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        user = _actor(request)
        slug = request.query_params.get("team")
        teams = [team_for_user(user, slug)] if slug else list(teams_visible_to(user))
        return Response(QuotaUsageSerializer(quota_usage_for_teams(teams), many=True).data)


class TeamQuotaListView(APIView):
    @extend_schema(
        operation_id="teams_quotas_list",
        summary="Quotas and usage of one team",
        responses={200: QuotaUsageSerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("usage", value=[QUOTA_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_user(_actor(request), slug)
        return Response(QuotaUsageSerializer(quota_usage_for_teams([team]), many=True).data)
