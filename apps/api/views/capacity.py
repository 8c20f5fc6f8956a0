"""Quota requests and reservations over the REST API.

Members and leads ask for more of a class for a period; leads decide per-user caps, platform
admins team quotas. Leads book capacity of a class for a window; bookings above the threshold
wait for an admin. Amounts are milli-GPU (1000 = one GPU), times ISO 8601 (UTC when no offset).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.accounts.selectors import team_for_user
from apps.api.base import error_responses
from apps.catalog.models import GpuClass
from apps.common.http import client_ip
from apps.quotas import core as quota_core
from apps.quotas.models import QuotaRequest
from apps.quotas.selectors import (
    quota_request_for_user,
    quota_request_may_decide,
    quota_requests_visible_to,
)
from apps.quotas.services import quota_request_cancel, quota_request_decide, quota_request_submit
from apps.reservations.models import Reservation
from apps.reservations.selectors import (
    calendar,
    quota_request_capacity_note,
    reservation_for_user,
    reservations_visible_to,
)
from apps.reservations.services import reservation_book, reservation_cancel, reservation_decide
from apps.scheduling.selectors import reservation_uses

LIST_LIMIT = 200
CALENDAR_MAX_HOURS = 24 * 14


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


def _gpu_class(name: str) -> GpuClass:
    gpu_class = GpuClass.objects.filter(name=name).first()
    if gpu_class is None:
        raise ValidationError({"gpu_class": [f"There is no GPU class named {name[:80]!r}."]})
    return gpu_class


# --- quota requests -------------------------------------------------------------------------


class QuotaRequestSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    gpu_class = serializers.CharField(source="gpu_class.name")
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    capacity_note = serializers.SerializerMethodField(
        help_text="Set while a team request waits and asks for more than is free in its period."
    )
    may_decide = serializers.SerializerMethodField(help_text="Whether you may decide it.")

    class Meta:
        model = QuotaRequest
        fields = ["id", "team", "gpu_class", "kind", "amount_milli", "starts_at", "ends_at"]
        fields += ["justification", "state", "requested_by", "decided_by", "decided_at"]
        fields += ["decision_comment", "created_at", "capacity_note", "may_decide"]
        read_only_fields = fields

    def get_capacity_note(self, obj: QuotaRequest) -> str | None:
        if obj.state != QuotaRequest.State.PENDING:
            return None
        return quota_request_capacity_note(obj)

    def get_may_decide(self, obj: QuotaRequest) -> bool:
        user = self.context.get("user")
        return (
            isinstance(user, User)
            and obj.state == QuotaRequest.State.PENDING
            and quota_request_may_decide(user, obj)
        )


class QuotaRequestCreateSerializer(serializers.Serializer):
    team = serializers.CharField(help_text="The team's slug.")
    gpu_class = serializers.CharField(help_text="e.g. H100-80GB")
    kind = serializers.ChoiceField(
        choices=quota_core.KINDS,
        default=quota_core.KIND_TEAM,
        help_text="team: more guarantee and limit for the team (admins decide); user: a higher "
        "per-user cap for you (the team's leads decide).",
    )
    amount_milli = serializers.IntegerField(min_value=1, max_value=10**9)
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    justification = serializers.CharField(max_length=quota_core.JUSTIFICATION_MAX)


class DecisionSerializer(serializers.Serializer):
    approve = serializers.BooleanField()
    comment = serializers.CharField(max_length=2000, allow_blank=True, default="")


QUOTA_REQUEST_EXAMPLE = {
    "id": 7,
    "team": "nlp",
    "gpu_class": "H100-80GB",
    "kind": "team",
    "amount_milli": 16000,
    "starts_at": "2026-03-02T00:00:00Z",
    "ends_at": "2026-03-16T00:00:00Z",
    "justification": "Paper deadline.",
    "state": "pending",
    "requested_by": "lena",
    "decided_by": None,
    "decided_at": None,
    "decision_comment": "",
    "created_at": "2026-03-01T09:00:00Z",
    "capacity_note": None,
    "may_decide": False,
}


RESERVATION_EXAMPLE = {
    "id": 3,
    "team": "vision",
    "gpu_class": "L40S-48GB",
    "size_milli": 250,
    "count": 20,
    "total_milli": 5000,
    "starts_at": "2026-03-05T09:00:00Z",
    "ends_at": "2026-03-05T13:00:00Z",
    "note": "Workshop",
    "state": "approved",
    "requested_by": "lena",
    "decided_by": None,
    "decided_at": None,
    "decision_comment": "",
    "created_at": "2026-03-01T09:00:00Z",
}
DECISION_EXAMPLE = OpenApiExample(
    "approve", value={"approve": True, "comment": "Capacity arrives Monday."}, request_only=True
)


def _answers(value: Any, code: str = "200") -> list[OpenApiExample]:
    return [OpenApiExample("answer", value=value, response_only=True, status_codes=[code])]


def _serialize_requests(rows: Any, user: User, *, many: bool = False) -> Any:
    return QuotaRequestSerializer(rows, many=many, context={"user": user}).data


class QuotaRequestListView(APIView):
    @extend_schema(
        operation_id="quota_requests_list",
        summary="Quota requests of my teams (admins: all)",
        parameters=[
            OpenApiParameter("team", str, description="Only this team (its slug)."),
            OpenApiParameter("state", str, description="pending, approved, rejected, cancelled"),
        ],
        responses={200: QuotaRequestSerializer(many=True), **error_responses(404)},
        examples=_answers([QUOTA_REQUEST_EXAMPLE]),
    )
    def get(self, request: Request) -> Response:
        user = _actor(request)
        rows = quota_requests_visible_to(user)
        slug = request.query_params.get("team")
        if slug:
            rows = rows.filter(team=team_for_user(user, slug))
        state = request.query_params.get("state")
        if state:
            if state not in QuotaRequest.State.values:
                raise ValidationError({"state": [f"One of: {', '.join(QuotaRequest.State)}."]})
            rows = rows.filter(state=state)
        return Response(_serialize_requests(rows[:LIST_LIMIT], user, many=True))

    @extend_schema(
        operation_id="quota_requests_create",
        summary="Ask for more of a GPU class for a period",
        request=QuotaRequestCreateSerializer,
        responses={201: QuotaRequestSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "two weeks",
                value={
                    "team": "nlp",
                    "gpu_class": "H100-80GB",
                    "kind": "team",
                    "amount_milli": 16000,
                    "starts_at": "2026-03-02T00:00:00Z",
                    "ends_at": "2026-03-16T00:00:00Z",
                    "justification": "Paper deadline.",
                },
                request_only=True,
            ),
            *_answers(QUOTA_REQUEST_EXAMPLE, "201"),
        ],
    )
    def post(self, request: Request) -> Response:
        actor = _actor(request)
        body = QuotaRequestCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team = team_for_user(actor, data["team"])
        created = quota_request_submit(
            actor=actor,
            team=team,
            gpu_class=_gpu_class(data["gpu_class"]),
            kind=data["kind"],
            amount_milli=data["amount_milli"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            justification=data["justification"],
            source_ip=client_ip(request),
        )
        return Response(_serialize_requests(created, actor), status=status.HTTP_201_CREATED)


class QuotaRequestDetailView(APIView):
    @extend_schema(
        operation_id="quota_requests_retrieve",
        summary="One quota request",
        responses={200: QuotaRequestSerializer, **error_responses(404)},
        examples=_answers(QUOTA_REQUEST_EXAMPLE),
    )
    def get(self, request: Request, request_id: int) -> Response:
        user = _actor(request)
        return Response(_serialize_requests(quota_request_for_user(user, request_id), user))


class QuotaRequestDecideView(APIView):
    @extend_schema(
        operation_id="quota_requests_decide",
        summary="Approve or reject a quota request, with a comment",
        description="Leads decide per-user caps of their team; platform admins team quotas.",
        request=DecisionSerializer,
        responses={200: QuotaRequestSerializer, **error_responses(403, 404)},
        examples=[
            DECISION_EXAMPLE,
            *_answers({**QUOTA_REQUEST_EXAMPLE, "state": "approved", "decided_by": "root"}),
        ],
    )
    def post(self, request: Request, request_id: int) -> Response:
        user = _actor(request)
        row = quota_request_for_user(user, request_id)
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = quota_request_decide(
            actor=user,
            request=row,
            approve=body.validated_data["approve"],
            comment=body.validated_data["comment"],
            source_ip=client_ip(request),
        )
        return Response(_serialize_requests(decided, user))


class QuotaRequestCancelView(APIView):
    @extend_schema(
        operation_id="quota_requests_cancel",
        summary="Withdraw a pending quota request",
        request=None,
        responses={200: QuotaRequestSerializer, **error_responses(403, 404)},
        examples=_answers({**QUOTA_REQUEST_EXAMPLE, "state": "cancelled"}),
    )
    def post(self, request: Request, request_id: int) -> Response:
        user = _actor(request)
        row = quota_request_for_user(user, request_id)
        done = quota_request_cancel(actor=user, request=row, source_ip=client_ip(request))
        return Response(_serialize_requests(done, user))


# --- reservations ---------------------------------------------------------------------------


class ReservationSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug")
    gpu_class = serializers.CharField(source="gpu_class.name")
    requested_by = serializers.CharField(source="requested_by.username")
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)

    class Meta:
        model = Reservation
        fields = ["id", "team", "gpu_class", "size_milli", "count", "total_milli", "starts_at"]
        fields += ["ends_at", "note", "state", "requested_by", "decided_by", "decided_at"]
        fields += ["decision_comment", "created_at"]
        read_only_fields = fields


class ReservationDetailSerializer(ReservationSerializer):
    reserved_gpu_hours = serializers.SerializerMethodField(help_text="Held so far.")
    used_gpu_hours = serializers.SerializerMethodField(
        help_text="Of those, used by the team's work of the class."
    )
    unused_gpu_hours = serializers.SerializerMethodField()

    class Meta(ReservationSerializer.Meta):
        fields = [*ReservationSerializer.Meta.fields, "reserved_gpu_hours", "used_gpu_hours"]
        fields += ["unused_gpu_hours"]
        read_only_fields = fields

    def _use(self, obj: Reservation) -> Any:
        cache = self.context.setdefault("uses", {})
        if obj.pk not in cache:
            (row,) = reservation_uses([obj], now=timezone.now())
            cache[obj.pk] = row.use
        return cache[obj.pk]

    def get_reserved_gpu_hours(self, obj: Reservation) -> float:
        return float(self._use(obj).reserved_gpu_hours)

    def get_used_gpu_hours(self, obj: Reservation) -> float:
        return float(self._use(obj).used_gpu_hours)

    def get_unused_gpu_hours(self, obj: Reservation) -> float:
        return float(self._use(obj).unused_gpu_hours)


class ReservationCreateSerializer(serializers.Serializer):
    team = serializers.CharField(help_text="The team's slug.")
    gpu_class = serializers.CharField(help_text="e.g. H100-80GB")
    count = serializers.IntegerField(min_value=1, max_value=10_000, help_text="How many units.")
    size_milli = serializers.IntegerField(
        min_value=1,
        max_value=1000,
        default=1000,
        help_text="One unit: 1000 = a whole GPU, 250 = a quarter (shared classes only).",
    )
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    note = serializers.CharField(max_length=500, allow_blank=True, default="")


class HourSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    free_milli = serializers.IntegerField(help_text="Free to book for the whole hour.")
    booked_milli = serializers.IntegerField(help_text="The most booked at any time in it.")


class ReservationListView(APIView):
    @extend_schema(
        operation_id="reservations_list",
        summary="Reservations of my teams (admins: all)",
        parameters=[
            OpenApiParameter("team", str, description="Only this team (its slug)."),
            OpenApiParameter("state", str, description="pending, approved, rejected, cancelled"),
        ],
        responses={200: ReservationSerializer(many=True), **error_responses(404)},
        examples=_answers([RESERVATION_EXAMPLE]),
    )
    def get(self, request: Request) -> Response:
        user = _actor(request)
        rows = reservations_visible_to(user)
        slug = request.query_params.get("team")
        if slug:
            rows = rows.filter(team=team_for_user(user, slug))
        state = request.query_params.get("state")
        if state:
            if state not in Reservation.State.values:
                raise ValidationError({"state": [f"One of: {', '.join(Reservation.State)}."]})
            rows = rows.filter(state=state)
        rows = rows.order_by("-starts_at", "-id")[:LIST_LIMIT]
        return Response(ReservationSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="reservations_create",
        summary="Book capacity of a GPU class for a window",
        description="Leads and admins. Refused when it does not fit beside the guarantees and "
        "other bookings at some time of the window; above "
        f"{settings.RESERVATION_APPROVAL_THRESHOLD_GPUS} GPU (setting "
        "RESERVATION_APPROVAL_THRESHOLD_GPUS) it waits for a platform admin.",
        request=ReservationCreateSerializer,
        responses={201: ReservationSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "workshop",
                value={
                    "team": "vision",
                    "gpu_class": "L40S-48GB",
                    "count": 20,
                    "size_milli": 250,
                    "starts_at": "2026-03-05T09:00:00Z",
                    "ends_at": "2026-03-05T13:00:00Z",
                    "note": "Workshop",
                },
                request_only=True,
            ),
            *_answers(RESERVATION_EXAMPLE, "201"),
        ],
    )
    def post(self, request: Request) -> Response:
        actor = _actor(request)
        body = ReservationCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        team = team_for_user(actor, data["team"])
        booked = reservation_book(
            actor=actor,
            team=team,
            gpu_class=_gpu_class(data["gpu_class"]),
            size_milli=data["size_milli"],
            count=data["count"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            note=data["note"],
            source_ip=client_ip(request),
        )
        return Response(ReservationSerializer(booked).data, status=status.HTTP_201_CREATED)


class ReservationCalendarView(APIView):
    @extend_schema(
        operation_id="reservations_calendar",
        summary="Free and booked capacity of a class per hour",
        parameters=[
            OpenApiParameter("gpu_class", str, required=True),
            OpenApiParameter("start", str, description="ISO 8601; default: this hour."),
            OpenApiParameter("hours", int, description=f"1–{CALENDAR_MAX_HOURS}; default 24."),
        ],
        responses={200: HourSerializer(many=True), **error_responses()},
        examples=_answers(
            [{"start": "2026-03-05T09:00:00Z", "free_milli": 3000, "booked_milli": 5000}]
        ),
    )
    def get(self, request: Request) -> Response:
        name = request.query_params.get("gpu_class", "")
        if not name:
            raise ValidationError({"gpu_class": ["Name a GPU class."]})
        gpu_class = _gpu_class(name)
        start = _calendar_start(request.query_params.get("start"))
        hours = request.query_params.get("hours", "24")
        if not hours.isdigit() or not 1 <= int(hours) <= CALENDAR_MAX_HOURS:
            raise ValidationError({"hours": [f"A whole number from 1 to {CALENDAR_MAX_HOURS}."]})
        rows = calendar(gpu_class, start=start, hours=int(hours))
        return Response(HourSerializer(rows, many=True).data)


def _calendar_start(text: str | None) -> datetime:
    if not text:
        return timezone.now().replace(minute=0, second=0, microsecond=0)
    field = serializers.DateTimeField()
    try:
        start: datetime = field.to_internal_value(text)
    except serializers.ValidationError as exc:
        raise ValidationError({"start": exc.detail}) from exc
    if not 2000 <= start.year <= 9000:
        raise ValidationError({"start": ["Pick a time between the years 2000 and 9000."]})
    return start.replace(minute=0, second=0, microsecond=0)


class ReservationDetailView(APIView):
    @extend_schema(
        operation_id="reservations_retrieve",
        summary="One reservation, with the GPU-hours held and used",
        responses={200: ReservationDetailSerializer, **error_responses(404)},
        examples=_answers(
            {
                **RESERVATION_EXAMPLE,
                "reserved_gpu_hours": 20.0,
                "used_gpu_hours": 12.5,
                "unused_gpu_hours": 7.5,
            }
        ),
    )
    def get(self, request: Request, reservation_id: int) -> Response:
        row = reservation_for_user(_actor(request), reservation_id)
        return Response(ReservationDetailSerializer(row).data)


class ReservationDecideView(APIView):
    @extend_schema(
        operation_id="reservations_decide",
        summary="Approve or reject a booking that waits (platform admins)",
        request=DecisionSerializer,
        responses={200: ReservationSerializer, **error_responses(403, 404)},
        examples=[DECISION_EXAMPLE, *_answers({**RESERVATION_EXAMPLE, "decided_by": "root"})],
    )
    def post(self, request: Request, reservation_id: int) -> Response:
        user = _actor(request)
        row = reservation_for_user(user, reservation_id)
        body = DecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = reservation_decide(
            actor=user,
            reservation=row,
            approve=body.validated_data["approve"],
            comment=body.validated_data["comment"],
            source_ip=client_ip(request),
        )
        return Response(ReservationSerializer(decided).data)


class ReservationCancelView(APIView):
    @extend_schema(
        operation_id="reservations_cancel",
        summary="Withdraw a booking (an open window closes now)",
        request=None,
        responses={200: ReservationSerializer, **error_responses(403, 404)},
        examples=_answers({**RESERVATION_EXAMPLE, "state": "cancelled"}),
    )
    def post(self, request: Request, reservation_id: int) -> Response:
        user = _actor(request)
        row = reservation_for_user(user, reservation_id)
        done = reservation_cancel(actor=user, reservation=row, source_ip=client_ip(request))
        return Response(ReservationSerializer(done).data)
