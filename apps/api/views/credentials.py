"""Team and personal secrets over the REST API: names, scopes and keys; never values."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.accounts.selectors import team_for_user
from apps.api.base import error_responses
from apps.common.http import client_ip
from apps.credentials import core
from apps.credentials.models import Secret
from apps.credentials.selectors import secret_for_user, secrets_usable_by
from apps.orchestration.credentials import secret_create, secret_delete, secret_rotate


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


class SecretSerializer(serializers.ModelSerializer):
    """What anyone is ever shown of a secret: its values never come back."""

    scope = serializers.ChoiceField(choices=core.SCOPES, read_only=True)
    owner = serializers.CharField(source="owner_username", read_only=True, allow_null=True)
    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Secret
        fields = ["name", "scope", "owner", "keys", "created_by", "created_at", "updated_at"]
        read_only_fields = fields


_VALUES = serializers.DictField(
    child=serializers.CharField(trim_whitespace=False, allow_blank=True),
    help_text=f"Key → value, at most {core.MAX_KEYS} keys; written to the cluster, never shown.",
)


class SecretCreateSerializer(serializers.Serializer):
    name = serializers.CharField(
        allow_blank=True, help_text="Lower-case letters, digits and -; e.g. hf or wandb."
    )
    personal = serializers.BooleanField(
        default=False, help_text="Yours only; otherwise a team secret (leads and admins)."
    )
    # The metaclass takes declared fields off the class, so ``.data`` stays DRF's property.
    data = _VALUES  # type: ignore[assignment]


class SecretRotateSerializer(serializers.Serializer):
    data = _VALUES  # type: ignore[assignment]


SECRET_EXAMPLE = {
    "name": "hf",
    "scope": "team",
    "owner": None,
    "keys": ["token"],
    "created_by": "lena",
    "created_at": "2026-01-05T09:00:00Z",
    "updated_at": "2026-01-05T09:00:00Z",
}
SCOPE_PARAMETER = OpenApiParameter(
    "scope",
    str,
    enum=list(core.SCOPES),
    required=False,
    description="Which secret when the team's and your own share the name (default: yours).",
)


class TeamSecretListView(APIView):
    @extend_schema(
        operation_id="teams_secrets_list",
        summary="Secrets of a team",
        description="The team's secrets and your own personal ones: names, keys, dates.",
        responses={200: SecretSerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("one", value=[SECRET_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_user(_actor(request), slug)
        rows = secrets_usable_by(_actor(request), team).select_related("created_by")
        return Response(SecretSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="teams_secrets_create",
        summary="Create a secret",
        description="Team secrets: leads and admins. Personal secrets: any member, for "
        "themselves. The values go to the team namespace in the cluster and are never shown "
        "back; requests refer to the secret by name.",
        request=SecretCreateSerializer,
        responses={201: SecretSerializer, **error_responses(400, 403, 404, 409, 503)},
        examples=[
            OpenApiExample(
                "hugging face",
                value={"name": "hf", "personal": False, "data": {"token": "hf_…"}},
                request_only=True,
            ),
            OpenApiExample(
                "created", value=SECRET_EXAMPLE, response_only=True, status_codes=["201"]
            ),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug)
        body = SecretCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        secret = secret_create(
            actor=actor,
            team=team,
            name=body.validated_data["name"],
            data=body.validated_data["data"],
            personal=body.validated_data["personal"],
            source_ip=client_ip(request),
        )
        return Response(SecretSerializer(secret).data, status=status.HTTP_201_CREATED)


class TeamSecretDetailView(APIView):
    def _secret(self, request: Request, slug: str, name: str) -> Secret:
        team = team_for_user(_actor(request), slug)
        return secret_for_user(
            _actor(request), team, name, scope=request.query_params.get("scope", "")
        )

    @extend_schema(
        operation_id="teams_secrets_rotate",
        summary="Rotate a secret",
        description="New keys and values replace the old ones; workloads started from now on "
        "see them.",
        parameters=[SCOPE_PARAMETER],
        request=SecretRotateSerializer,
        responses={200: SecretSerializer, **error_responses(400, 403, 404, 409, 503)},
        examples=[
            OpenApiExample("new token", value={"data": {"token": "hf_…"}}, request_only=True),
            OpenApiExample("rotated", value=SECRET_EXAMPLE, response_only=True),
        ],
    )
    def put(self, request: Request, slug: str, name: str) -> Response:
        secret = self._secret(request, slug, name)
        body = SecretRotateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        secret = secret_rotate(
            actor=_actor(request),
            secret=secret,
            data=body.validated_data["data"],
            source_ip=client_ip(request),
        )
        return Response(SecretSerializer(secret).data)

    @extend_schema(
        operation_id="teams_secrets_delete",
        summary="Delete a secret",
        parameters=[SCOPE_PARAMETER],
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, slug: str, name: str) -> Response:
        secret = self._secret(request, slug, name)
        secret_delete(actor=_actor(request), secret=secret, source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
