from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from apps.api.schema import CachedSchemaView, DocsView
from apps.web.views import health, oidc

admin.site.site_header = "gpupaas administration"
admin.site.site_title = "gpupaas admin"
admin.site.index_title = "Platform governance"

urlpatterns = [
    path("", include("apps.web.urls.portal")),
    path("accounts/", include("apps.web.urls.accounts")),
    path("api/v1/", include("apps.api.urls")),
    path("api/schema/", CachedSchemaView.as_view(), name="api-schema"),
    path("api/docs/", DocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("usage/", include("apps.web.urls.telemetry")),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="prometheus-django-metrics"),
]

# Mounted always; the views refuse to start a flow when OIDC is not configured.
urlpatterns += [
    path("oidc/authenticate/", oidc.SignInView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.CallbackView.as_view(), name="oidc_authentication_callback"),
    path("oidc/backchannel-logout/", oidc.backchannel_logout, name="oidc_backchannel_logout"),
]

handler500 = "apps.web.views.errors.server_error"
handler403 = "apps.web.views.errors.permission_denied"
handler404 = "apps.web.views.errors.page_not_found"
