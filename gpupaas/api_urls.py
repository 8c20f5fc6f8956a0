from __future__ import annotations

from django.urls import path

from apps.accounts import api as accounts_api

app_name = "api"

urlpatterns = [
    path("me/", accounts_api.MeView.as_view(), name="me"),
    path("tokens/", accounts_api.TokenListView.as_view(), name="tokens"),
    path("tokens/<int:token_id>/", accounts_api.TokenDetailView.as_view(), name="token-detail"),
]
