"""Governance over the REST API: a team's policy and budget (members read; platform admins
write; leads approve more work under a budget's hard stop) and right-sizing advice (admins)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_for_user
from apps.api.base import error_responses
from apps.api.params import MonthField
from apps.budgets import core as budget_core
from apps.budgets.selectors import budget_report, this_month
from apps.budgets.services import budget_set, budget_stop_lift
from apps.catalog.models import GpuClass, Image
from apps.common.http import client_ip
from apps.common.parsing import parse_month
from apps.policies import core as policy_core
from apps.policies.selectors import team_policy_spec
from apps.policies.services import team_policy_set
from apps.telemetry.selectors import rightsizing
from apps.telemetry.services.rightsizing import advice_apply

NAME_LIST_MAX = 100


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


# --- policy ------------------------------------------------------------------------------------


class PerKindSerializer(serializers.Serializer):
    notebook = serializers.IntegerField(required=False, allow_null=True)
    training = serializers.IntegerField(required=False, allow_null=True)
    sweep = serializers.IntegerField(required=False, allow_null=True)


class PolicySerializer(serializers.Serializer):
    allowed_classes = serializers.ListField(
        child=serializers.CharField(max_length=100),
        max_length=NAME_LIST_MAX,
        required=False,
        default=list,
        help_text="GPU class names the team may use; empty: every class it has a quota of.",
    )
    allowed_images = serializers.ListField(
        child=serializers.CharField(max_length=100),
        max_length=NAME_LIST_MAX,
        required=False,
        default=list,
        help_text="Image names the team may use; empty: every offered image.",
    )
    max_gpu_milli_per_workload = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Milli-GPU one workload may hold at once (a sweep: its trials at once).",
    )
    max_runtime_seconds = PerKindSerializer(
        required=False, help_text="Per kind; a request without one gets the cap."
    )
    default_idle_timeout_seconds = PerKindSerializer(
        required=False, help_text="Per kind; a request without one gets it."
    )
    exclusive_classes = serializers.ListField(
        child=serializers.CharField(max_length=100),
        max_length=NAME_LIST_MAX,
        required=False,
        default=list,
        help_text="Classes on which the team does not share a GPU with other teams: fractions "
        "of time-sliced and vGPU classes are refused.",
    )


class PolicyOutSerializer(PolicySerializer):
    team = serializers.CharField()
    summary = serializers.ListField(
        child=serializers.CharField(), help_text="The policy in short lines for people."
    )


POLICY_EXAMPLE = {
    "team": "contractors",
    "allowed_classes": ["L40S-48GB"],
    "allowed_images": ["PyTorch training"],
    "max_gpu_milli_per_workload": 2000,
    "max_runtime_seconds": {"training": 172800},
    "default_idle_timeout_seconds": {"notebook": 1800},
    "exclusive_classes": ["L40S-48GB"],
    "summary": ["GPU classes: L40S-48GB", "images: PyTorch training"],
}


def _policy_body(team: Team) -> dict[str, Any]:
    spec = team_policy_spec(team) or policy_core.PolicySpec(team=team.name)
    return {
        "team": team.slug,
        "allowed_classes": sorted(spec.allowed_classes or ()),
        "allowed_images": sorted(spec.allowed_images or ()),
        "max_gpu_milli_per_workload": spec.max_gpu_milli_per_workload,
        "max_runtime_seconds": dict(spec.max_runtime_seconds),
        "default_idle_timeout_seconds": dict(spec.default_idle_timeout_seconds),
        "exclusive_classes": sorted(spec.exclusive_classes),
        "summary": policy_core.summary(spec),
    }


def _by_names(model: type[GpuClass] | type[Image], names: list[str], field: str) -> list[Any]:
    found = {o.name: o for o in model.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        raise serializers.ValidationError({field: [f"No such name: {', '.join(missing)}."]})
    return [found[n] for n in dict.fromkeys(names)]


class TeamPolicyView(APIView):
    @extend_schema(
        operation_id="teams_policy_read",
        summary="A team's policy",
        description="What the team may ask for beyond its quota; every door refuses requests "
        "outside it with a message naming the policy.",
        responses={200: PolicyOutSerializer, **error_responses(404)},
        examples=[OpenApiExample("policy", value=POLICY_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        return Response(_policy_body(team_for_user(_actor(request), slug)))

    @extend_schema(
        operation_id="teams_policy_set",
        summary="Set a team's policy",
        description="Platform admins. Replaces the policy as a whole (audited).",
        request=PolicySerializer,
        responses={200: PolicyOutSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "contractors",
                value={k: v for k, v in POLICY_EXAMPLE.items() if k not in ("team", "summary")},
                request_only=True,
            ),
            OpenApiExample("policy", value=POLICY_EXAMPLE, response_only=True),
        ],
    )
    def put(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug)
        if not platform_may(actor, Act.GOVERN_TEAMS):
            raise PermissionDenied("Only platform admins set team policies.")
        body = PolicySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team_policy_set(
            actor=actor,
            team=team,
            allowed_classes=_by_names(GpuClass, data["allowed_classes"], "allowed_classes"),
            allowed_images=_by_names(Image, data["allowed_images"], "allowed_images"),
            max_gpu_milli_per_workload=data["max_gpu_milli_per_workload"],
            max_runtime_seconds=data.get("max_runtime_seconds") or {},
            idle_timeout_seconds=data.get("default_idle_timeout_seconds") or {},
            exclusive_classes=_by_names(GpuClass, data["exclusive_classes"], "exclusive_classes"),
            source_ip=client_ip(request),
        )
        return Response(_policy_body(team))


# --- budget ------------------------------------------------------------------------------------


class BudgetQuerySerializer(serializers.Serializer):
    month = MonthField(required=False, help_text="YYYY-MM; default: this month.")


class BudgetSetSerializer(serializers.Serializer):
    month = MonthField(required=False, help_text="YYYY-MM it holds from; default: this month.")
    amount = serializers.DecimalField(
        max_digits=14, decimal_places=2, min_value=0, help_text="In the platform currency."
    )
    thresholds = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=1000),
        required=False,
        default=lambda: list(budget_core.DEFAULT_THRESHOLDS),
        help_text="Percent of the amount at which the leads and admins are told.",
    )
    hard_stop = serializers.BooleanField(required=False, default=False)


class BudgetSerializer(serializers.Serializer):
    team = serializers.CharField()
    month = serializers.CharField()
    currency = serializers.CharField()
    amount = serializers.CharField(allow_null=True, help_text="null: the team has no budget.")
    spent = serializers.CharField(allow_null=True)
    run_rate_per_hour = serializers.CharField(allow_null=True)
    forecast = serializers.CharField(allow_null=True, help_text="At the month's end.")
    thresholds = serializers.ListField(child=serializers.IntegerField())
    hard_stop = serializers.BooleanField()
    stopping = serializers.BooleanField(help_text="New non-batch work of members is refused.")
    stop_lifted = serializers.BooleanField(help_text="A lead approved more work this month.")


BUDGET_EXAMPLE = {
    "team": "nlp",
    "month": "2026-11",
    "currency": "EUR",
    "amount": "40000.00",
    "spent": "31250.50",
    "run_rate_per_hour": "54.00",
    "forecast": "41618.50",
    "thresholds": [50, 80, 100],
    "hard_stop": True,
    "stopping": False,
    "stop_lifted": False,
}


def _budget_body(team: Team, month: Any = None) -> dict[str, Any]:
    first = month or this_month()
    report = budget_report(team, first)
    empty: dict[str, Any] = {
        "team": team.slug,
        "month": budget_core.month_label(first),
        "currency": settings.PLATFORM_CURRENCY,
        "amount": None,
        "spent": None,
        "run_rate_per_hour": None,
        "forecast": None,
        "thresholds": [],
        "hard_stop": False,
        "stopping": False,
        "stop_lifted": False,
    }
    if report is None:
        return empty
    s = report.state
    return {
        **empty,
        "amount": f"{s.amount:.2f}",
        "spent": f"{s.spent:.2f}",
        "run_rate_per_hour": f"{s.run_rate_per_hour:.2f}",
        "forecast": f"{report.forecast:.2f}",
        "thresholds": list(s.thresholds),
        "hard_stop": s.hard_stop,
        "stopping": s.stopping,
        "stop_lifted": s.stop_lifted,
    }


class TeamBudgetView(APIView):
    @extend_schema(
        operation_id="teams_budget_read",
        summary="A team's budget for a month",
        description="Spend so far, the run rate now and the month's forecast, in the platform "
        "currency. ``amount`` is null when the team has no budget.",
        parameters=[OpenApiParameter("month", str, description="YYYY-MM; default: this month.")],
        responses={200: BudgetSerializer, **error_responses(404)},
        examples=[OpenApiExample("budget", value=BUDGET_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_user(_actor(request), slug, act=Act.SEE_SPEND)
        query = BudgetQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        month = query.validated_data.get("month")
        return Response(_budget_body(team, parse_month(month) if month else None))

    @extend_schema(
        operation_id="teams_budget_set",
        summary="Set a team's budget",
        description="Platform admins. Holds from the month on until a later month has its own "
        "(audited).",
        request=BudgetSetSerializer,
        responses={200: BudgetSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "set",
                value={"amount": "40000", "thresholds": [50, 80, 100], "hard_stop": True},
                request_only=True,
            ),
            OpenApiExample("budget", value=BUDGET_EXAMPLE, response_only=True),
        ],
    )
    def put(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug, act=Act.SEE_SPEND)
        body = BudgetSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        month = parse_month(data["month"]) if data.get("month") else this_month()
        budget_set(
            actor=actor,
            team=team,
            month=month,
            amount=data["amount"],
            thresholds=data["thresholds"],
            hard_stop=data["hard_stop"],
            source_ip=client_ip(request),
        )
        return Response(_budget_body(team, month))


class TeamBudgetApproveView(APIView):
    @extend_schema(
        operation_id="teams_budget_approve",
        summary="Approve more work this month",
        description="Leads of the team and admins: lifts the hard stop for this month (audited).",
        request=None,
        responses={200: BudgetSerializer, **error_responses(400, 403, 404)},
        examples=[OpenApiExample("approved", value=BUDGET_EXAMPLE, response_only=True)],
    )
    def post(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug, act=Act.SEE_SPEND)
        budget_stop_lift(actor=actor, team=team, month=this_month(), source_ip=client_ip(request))
        return Response(_budget_body(team))


# --- right-sizing advice -----------------------------------------------------------------------


class AdviceQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(
        min_value=1,
        max_value=rightsizing.MAX_DAYS,
        required=False,
        default=rightsizing.DEFAULT_DAYS,
    )


class AdviceApplySerializer(AdviceQuerySerializer):
    team = serializers.SlugField(max_length=100)
    gpu_class = serializers.CharField(max_length=100)


class AdviceSerializer(serializers.Serializer):
    team = serializers.CharField()
    gpu_class = serializers.CharField()
    days = serializers.IntegerField()
    guaranteed_milli = serializers.IntegerField()
    limit_milli = serializers.IntegerField()
    suggested_guaranteed_milli = serializers.IntegerField(allow_null=True)
    suggested_limit_milli = serializers.IntegerField(allow_null=True)
    changes = serializers.BooleanField()
    reason = serializers.CharField()
    allocated_gpu_hours = serializers.FloatField()
    used_gpu_hours = serializers.FloatField()
    p95_used_milli = serializers.IntegerField()
    p95_allocated_milli = serializers.IntegerField()
    peak_allocated_milli = serializers.IntegerField()


ADVICE_EXAMPLE = {
    "team": "vision",
    "gpu_class": "H100-80GB",
    "days": 14,
    "guaranteed_milli": 8000,
    "limit_milli": 16000,
    "suggested_guaranteed_milli": 2000,
    "suggested_limit_milli": 5000,
    "changes": True,
    "reason": "95 % of the time at most 2 GPU were in use (guarantee 2); 95 % of the time at "
    "most 4 GPU were held, peak 12 (limit 5 with a quarter headroom).",
    "allocated_gpu_hours": 1456.0,
    "used_gpu_hours": 784.0,
    "p95_used_milli": 2000,
    "p95_allocated_milli": 4000,
    "peak_allocated_milli": 12000,
}


def _advice_body(row: rightsizing.AdviceRow) -> dict[str, Any]:
    a = row.advice
    e = a.evidence
    return {
        "team": row.team.slug,
        "gpu_class": row.gpu_class.name,
        "days": row.days,
        "guaranteed_milli": a.current_guaranteed_milli,
        "limit_milli": a.current_limit_milli,
        "suggested_guaranteed_milli": a.guaranteed_milli,
        "suggested_limit_milli": a.limit_milli,
        "changes": a.changes,
        "reason": a.reason,
        "allocated_gpu_hours": e.allocated_gpu_hours,
        "used_gpu_hours": e.used_gpu_hours,
        "p95_used_milli": e.p95_used_milli,
        "p95_allocated_milli": e.p95_allocated_milli,
        "peak_allocated_milli": e.peak_allocated_milli,
    }


def _admin(request: Request, act: Act) -> User:
    """The caller, when their platform role may ``act`` (reading advice or applying it)."""
    actor = _actor(request)
    if not platform_may(actor, act):
        raise PermissionDenied("Right-sizing advice is for platform admins.")
    return actor


class AdviceListView(APIView):
    @extend_schema(
        operation_id="advice_list",
        summary="Right-sizing advice",
        description="Platform admins. Per team and class, a suggested guarantee and limit from "
        "measured usage over the last ``days`` days, with the evidence.",
        parameters=[AdviceQuerySerializer],
        responses={200: AdviceSerializer(many=True), **error_responses(403)},
        examples=[OpenApiExample("advice", value=[ADVICE_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        _admin(request, Act.SEE_TEAMS)
        query = AdviceQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = rightsizing.rightsizing(days=query.validated_data["days"])
        return Response([_advice_body(r) for r in rows])


class AdviceApplyView(APIView):
    @extend_schema(
        operation_id="advice_apply",
        summary="Apply right-sizing advice",
        description="Platform admins. Computes the advice again and sets the quota to it "
        "through the quotas service; the evidence is audited with it.",
        request=AdviceApplySerializer,
        responses={200: AdviceSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "apply",
                value={"team": "vision", "gpu_class": "H100-80GB", "days": 14},
                request_only=True,
            ),
            OpenApiExample("applied", value=ADVICE_EXAMPLE, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        actor = _admin(request, Act.GOVERN_TEAMS)
        body = AdviceApplySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team = Team.objects.get(slug=data["team"])
        gpu_class = GpuClass.objects.get(name=data["gpu_class"])
        advice_apply(
            actor=actor,
            team=team,
            gpu_class=gpu_class,
            days=data["days"],
            source_ip=client_ip(request),
        )
        rows = [
            r
            for r in rightsizing.rightsizing([team], days=data["days"])
            if r.gpu_class.pk == gpu_class.pk
        ]
        return Response(_advice_body(rows[0]))
