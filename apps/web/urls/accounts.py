from __future__ import annotations

from django.urls import path

from apps.web.views import accounts as views

app_name = "accounts"

urlpatterns = [
    path("login/", views.login_page, name="login"),
    path("dev-login/", views.dev_login, name="dev-login"),
    path("logout/", views.logout_view, name="logout"),
    path("no-team/", views.no_team, name="no-team"),
    path("profile/", views.profile, name="profile"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token-revoke"),
]
