"""Accounts over the REST API: who am I, my teams and their members, my tokens."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import core
from apps.accounts.models import ApiToken, Membership, Team, User
from apps.accounts.roles import Role
from apps.accounts.selectors import (
    is_platform_admin,
    memberships_of,
    platform_roles,
    team_for_user,
    teams_visible_to,
    token_for_user,
    tokens_of,
)
from apps.accounts.services import (
    api_token_create,
    api_token_revoke,
    membership_remove,
    membership_set,
)
from apps.api.base import error_responses
from apps.common.http import client_ip


class ApiTokenScheme(OpenApiAuthenticationExtension):
    """Describes ``Authorization: Bearer gpp_…`` in the OpenAPI document."""

    target_class = "apps.api.authentication.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": (
                "A personal API token (gpp_…) from the portal. The read scope allows GET only; "
                "the write scope allows everything."
            ),
        }


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


# --- me --------------------------------------------------------------------------------------

ME_RESPONSE = inline_serializer(
    name="Me",
    fields={
        "username": serializers.CharField(),
        "email": serializers.CharField(),
        "is_admin": serializers.BooleanField(),
        "platform_roles": serializers.ListField(
            child=serializers.ChoiceField(choices=[r.value for r in Role]),
            help_text="The caller's platform roles: admin, operator, auditor, billing.",
        ),
        "teams": inline_serializer(
            name="MyTeam",
            fields={
                "slug": serializers.CharField(),
                "name": serializers.CharField(),
                "role": serializers.CharField(),
            },
            many=True,
        ),
    },
)


class MeView(APIView):
    @extend_schema(
        operation_id="me_retrieve",
        summary="Who am I",
        responses={200: ME_RESPONSE, **error_responses()},
        examples=[
            OpenApiExample(
                "member of one team",
                value={
                    "username": "alice",
                    "email": "alice@example.com",
                    "is_admin": False,
                    "platform_roles": [],
                    "teams": [{"slug": "vision", "name": "Vision", "role": "member"}],
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        user = _actor(request)
        return Response(
            {
                "username": user.get_username(),
                "email": user.email,
                "is_admin": is_platform_admin(user),
                "platform_roles": sorted(platform_roles(user)),
                "teams": [
                    {"slug": m.team.slug, "name": m.team.name, "role": m.role}
                    for m in memberships_of(user)
                ],
            }
        )


# --- teams -----------------------------------------------------------------------------------


class TeamSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="Your role; null for admins not in it.")

    class Meta:
        model = Team
        fields = ["slug", "name", "namespace", "role"]
        read_only_fields = fields

    def get_role(self, team: Team) -> str | None:
        roles: dict[int, str] = self.context.get("roles", {})
        return roles.get(team.pk)


def _roles(user: User) -> dict[int, str]:
    return dict(Membership.objects.filter(user=user).values_list("team_id", "role"))


TEAM_EXAMPLE = {"slug": "vision", "name": "Vision", "namespace": "team-vision", "role": "lead"}


class TeamListView(APIView):
    @extend_schema(
        operation_id="teams_list",
        summary="My teams",
        description="The teams you belong to; admins see every team.",
        responses={200: TeamSerializer(many=True), **error_responses()},
        examples=[OpenApiExample("one team", value=[TEAM_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        user = _actor(request)
        teams = teams_visible_to(user)
        return Response(TeamSerializer(teams, many=True, context={"roles": _roles(user)}).data)


class TeamDetailView(APIView):
    @extend_schema(
        operation_id="teams_retrieve",
        summary="One team",
        responses={200: TeamSerializer, **error_responses(404)},
        examples=[OpenApiExample("team", value=TEAM_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        user = _actor(request)
        team = team_for_user(user, slug)
        return Response(TeamSerializer(team, context={"roles": _roles(user)}).data)


class MemberSerializer(serializers.ModelSerializer):
    username = serializers.CharField(source="user.username", read_only=True)
    display_name = serializers.CharField(source="user.display_name", read_only=True)
    email = serializers.CharField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["username", "display_name", "email", "role", "source", "created_at"]
        read_only_fields = fields


class MemberSetSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Membership.Role.choices, default=core.ROLE_MEMBER)


MEMBER_EXAMPLE = {
    "username": "alice",
    "display_name": "Alice",
    "email": "alice@example.com",
    "role": "member",
    "source": "idp",
    "created_at": "2025-01-01T12:00:00Z",
}


class TeamMemberListView(APIView):
    @extend_schema(
        operation_id="teams_members_list",
        summary="Members of a team",
        responses={200: MemberSerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("members", value=[MEMBER_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_user(_actor(request), slug)
        members = team.memberships.select_related("user").order_by("user__username")
        return Response(MemberSerializer(members, many=True).data)

    @extend_schema(
        operation_id="teams_members_set",
        summary="Add a member or change a role",
        description="Team leads and admins only.",
        request=MemberSetSerializer,
        responses={200: MemberSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "make lead", value={"username": "bob", "role": "lead"}, request_only=True
            ),
            OpenApiExample(
                "lead now",
                value={**MEMBER_EXAMPLE, "username": "bob", "role": "lead", "source": "manual"},
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug)
        body = MemberSetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = User.objects.filter(username=body.validated_data["username"]).first()
        if user is None:
            raise serializers.ValidationError({"username": "No user with this name has signed in."})
        membership = membership_set(
            actor=actor,
            team=team,
            user=user,
            role=body.validated_data["role"],
            source_ip=client_ip(request),
        )
        return Response(MemberSerializer(membership).data)


class TeamMemberDetailView(APIView):
    @extend_schema(
        operation_id="teams_members_remove",
        summary="Remove a member",
        description="Team leads and admins only.",
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, slug: str, username: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug)
        membership = team.memberships.select_related("user", "team").get(user__username=username)
        membership_remove(actor=actor, membership=membership, source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- tokens ----------------------------------------------------------------------------------


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = [
            "id",
            "name",
            "scopes",
            "created_at",
            "expires_at",
            "last_used_at",
            "revoked_at",
            "parent",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "parent": {"help_text": "The token that created this one; it dies with it."}
        }


class ApiTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=core.ALL_SCOPES), min_length=1, max_length=2
    )
    expires_in_days = serializers.IntegerField(
        min_value=1,
        max_value=36500,
        required=False,
        allow_null=True,
        help_text=(
            "Omit for the longest allowed: the server's maximum lifetime, and no later than "
            "the token that makes this request. A token never expires only when neither limits it."
        ),
    )


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The secret; shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


TOKEN_EXAMPLE = {
    "id": 7,
    "name": "ci pipeline",
    "scopes": ["read"],
    "created_at": "2025-01-01T12:00:00Z",
    "expires_at": "2025-01-31T12:00:00Z",
    "last_used_at": None,
    "revoked_at": None,
    "parent": None,
}


class TokenListView(APIView):
    @extend_schema(
        operation_id="tokens_list",
        summary="My API tokens",
        responses={200: ApiTokenSerializer(many=True), **error_responses()},
        examples=[OpenApiExample("tokens", value=[TOKEN_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return Response(ApiTokenSerializer(tokens_of(_actor(request)), many=True).data)

    @extend_schema(
        operation_id="tokens_create",
        summary="Create an API token",
        description=(
            "The secret is in this response only; it is stored as a digest. A token created "
            "with a token is its child: it may allow no more than it, ends no later than it, "
            "and is revoked with it. Each person may hold a limited number of live tokens."
        ),
        request=ApiTokenCreateSerializer,
        responses={201: ApiTokenCreatedSerializer, **error_responses(400, 403)},
        examples=[
            OpenApiExample(
                "read-only for CI",
                value={"name": "ci pipeline", "scopes": ["read"], "expires_in_days": 30},
                request_only=True,
            ),
            OpenApiExample(
                "created",
                value={**TOKEN_EXAMPLE, "token": "gpp_1a2b3c4d_…"},
                response_only=True,
            ),
        ],
    )
    def post(self, request: Request) -> Response:
        body = ApiTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        days = body.validated_data.get("expires_in_days")
        token, plaintext = api_token_create(
            actor=_actor(request),
            name=body.validated_data["name"],
            scopes=body.validated_data["scopes"],
            expires_at=timezone.now() + timedelta(days=days) if days else None,
            parent=request.auth if isinstance(request.auth, ApiToken) else None,
            source_ip=client_ip(request),
        )
        data = {**ApiTokenSerializer(token).data, "token": plaintext}
        response = Response(data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class TokenDetailView(APIView):
    @extend_schema(
        operation_id="tokens_retrieve",
        summary="One of my API tokens",
        responses={200: ApiTokenSerializer, **error_responses(404)},
        examples=[OpenApiExample("token", value=TOKEN_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, token_id: int) -> Response:
        token = token_for_user(_actor(request), token_id)
        return Response(ApiTokenSerializer(token).data)

    @extend_schema(
        operation_id="tokens_revoke",
        summary="Revoke one of my API tokens",
        description="The tokens created with it (and with those) are revoked with it.",
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, token_id: int) -> Response:
        token = token_for_user(_actor(request), token_id)
        api_token_revoke(actor=_actor(request), token=token, source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
