from __future__ import annotations

from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import ApiToken, User
from apps.accounts.selectors import memberships_of, token_for_user, tokens_of
from apps.accounts.services import api_token_revoke
from gpupaas.http import client_ip


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "scopes", "created_at", "expires_at", "last_used_at", "revoked_at"]


class MeView(APIView):
    def get(self, request: Request) -> Response:
        user: User = request.user  # type: ignore[assignment]
        return Response(
            {
                "username": user.get_username(),
                "email": user.email,
                "is_admin": user.is_staff,
                "teams": [
                    {"slug": m.team.slug, "name": m.team.name, "role": m.role}
                    for m in memberships_of(user)
                ],
            }
        )


class TokenListView(APIView):
    def get(self, request: Request) -> Response:
        tokens = tokens_of(request.user)  # type: ignore[arg-type]
        return Response(ApiTokenSerializer(tokens, many=True).data)


class TokenDetailView(APIView):
    def get(self, request: Request, token_id: int) -> Response:
        token = token_for_user(request.user, token_id)  # type: ignore[arg-type]
        return Response(ApiTokenSerializer(token).data)

    def delete(self, request: Request, token_id: int) -> Response:
        token = token_for_user(request.user, token_id)  # type: ignore[arg-type]
        api_token_revoke(actor=request.user, token=token, source_ip=client_ip(request))  # type: ignore[arg-type]
        return Response(status=status.HTTP_204_NO_CONTENT)
