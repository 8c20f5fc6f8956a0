"""Notifications over the REST API: my notices, marking them read, my preferences."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import Team, User
from apps.api.base import PagePagination, error_responses
from apps.common.http import client_ip
from apps.notifications import core, selectors, services
from apps.notifications.models import Notice

EVENTS = [e.value for e in core.NoticeEvent]


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


class NoticeSerializer(serializers.ModelSerializer):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )

    class Meta:
        model = Notice
        fields = ["id", "event", "title", "body", "link", "team", "created", "read_at"]
        read_only_fields = fields


NOTICE_EXAMPLE = {
    "id": 41,
    "event": "failed",
    "title": "Training job resnet failed",
    "body": "Exit code 137 (out of memory).",
    "link": "/workloads/12/",
    "team": "vision",
    "created": "2026-03-02T10:15:00Z",
    "read_at": None,
}


class NoticeListView(APIView):
    pagination_class = PagePagination

    @extend_schema(
        operation_id="notifications_list",
        summary="My notices",
        description=(
            "What you were told (the events you chose for the portal), newest first. "
            "`unread=true` lists only those not yet marked read."
        ),
        parameters=[
            OpenApiParameter("unread", bool, description="Only unread notices."),
            OpenApiParameter("page", int, description="Page number, from 1."),
            OpenApiParameter("page_size", int, description="Rows per page."),
        ],
        responses={200: NoticeSerializer(many=True), **error_responses(400, 404)},
        examples=[
            OpenApiExample(
                "a page",
                value={"count": 1, "next": None, "previous": None, "results": [NOTICE_EXAMPLE]},
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        unread = request.query_params.get("unread", "")
        if unread not in {"", "true", "false"}:
            raise serializers.ValidationError({"unread": ["Use true or false."]})
        rows = selectors.notices_for(_actor(request)).select_related("team")
        if unread == "true":
            rows = rows.filter(read_at__isnull=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(NoticeSerializer(page, many=True).data)


class MarkReadSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        required=False,
        max_length=1000,
        help_text="The notices to mark read; leave out to mark all of yours read.",
    )


class MarkedSerializer(serializers.Serializer[dict[str, int]]):
    marked = serializers.IntegerField(help_text="How many notices were marked read.")


MARKED = MarkedSerializer


class NoticeReadAllView(APIView):
    @extend_schema(
        operation_id="notifications_read",
        summary="Mark notices read",
        description="Marks the given notices (or all) read. Ids that are not yours are ignored.",
        request=MarkReadSerializer,
        responses={200: MARKED, **error_responses(403)},
        examples=[
            OpenApiExample("these", value={"ids": [41, 42]}, request_only=True),
            OpenApiExample("marked", value={"marked": 2}, response_only=True),
        ],
    )
    def post(self, request: Request) -> Response:
        body = MarkReadSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        ids = body.validated_data.get("ids")
        marked = services.notices_mark_read(user=_actor(request), ids=ids)
        return Response({"marked": marked})


class NoticeReadView(APIView):
    @extend_schema(
        operation_id="notification_read",
        summary="Mark one notice read",
        request=None,
        responses={200: NoticeSerializer, **error_responses(403, 404)},
        examples=[
            OpenApiExample(
                "read",
                value={**NOTICE_EXAMPLE, "read_at": "2026-03-02T10:20:00Z"},
                response_only=True,
            )
        ],
    )
    def post(self, request: Request, notice_id: int) -> Response:
        user = _actor(request)
        notice = Notice.objects.select_related("team").get(pk=notice_id, user=user)
        services.notices_mark_read(user=user, ids=[notice.pk])
        notice.refresh_from_db()
        return Response(NoticeSerializer(notice).data)


class PreferencesSerializer(serializers.Serializer):
    email_events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), max_length=len(EVENTS) * 2
    )
    webhook_events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), max_length=len(EVENTS) * 2
    )
    portal_events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), max_length=len(EVENTS) * 2
    )
    webhook_url = serializers.CharField(
        allow_blank=True, max_length=core.WEBHOOK_URL_MAX_LENGTH, trim_whitespace=True
    )


def _preferences_body(prefs: core.Preferences) -> dict[str, Any]:
    return {
        "email_events": sorted(prefs.events.get(core.Channel.EMAIL, ())),
        "webhook_events": sorted(prefs.events.get(core.Channel.WEBHOOK, ())),
        "portal_events": sorted(prefs.events.get(core.Channel.PORTAL, ())),
        "webhook_url": prefs.webhook_url,
    }


PREFS_EXAMPLE = {
    "email_events": ["failed", "preempted"],
    "webhook_events": ["failed"],
    "portal_events": ["admitted", "running", "finished", "failed", "preempted"],
    "webhook_url": "https://hooks.slack.com/services/T000/B000/XXXX",
}


class NotificationPreferencesView(APIView):
    @extend_schema(
        operation_id="me_notification_preferences_retrieve",
        summary="My notification preferences",
        description="For each channel, the events it carries. Event names: " + ", ".join(EVENTS),
        responses={200: PreferencesSerializer, **error_responses()},
        examples=[OpenApiExample("choices", value=PREFS_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return Response(_preferences_body(selectors.preferences_of(_actor(request))))

    @extend_schema(
        operation_id="me_notification_preferences_update",
        summary="Set my notification preferences",
        description=(
            "Replaces your choices. The webhook URL must be https to a public address; "
            "webhook events need a URL."
        ),
        request=PreferencesSerializer,
        responses={200: PreferencesSerializer, **error_responses(403)},
        examples=[OpenApiExample("choices", value=PREFS_EXAMPLE)],
    )
    def put(self, request: Request) -> Response:
        body = PreferencesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        user = _actor(request)
        try:
            services.notification_preferences_set(
                actor=user,
                email_events=data["email_events"],
                webhook_events=data["webhook_events"],
                portal_events=data["portal_events"],
                webhook_url=data["webhook_url"],
                source_ip=client_ip(request),
            )
        except core.WebhookUrlError as exc:
            raise serializers.ValidationError({"webhook_url": [str(exc)]}) from None
        return Response(_preferences_body(selectors.preferences_of(user)))
