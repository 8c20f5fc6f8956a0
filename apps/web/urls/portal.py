from __future__ import annotations

from django.urls import path

from apps.web.views import accounts as account_views
from apps.web.views import credentials as credential_views
from apps.web.views import datasets as dataset_views
from apps.web.views import notebooks as notebook_views
from apps.web.views import notifications as notification_views
from apps.web.views import workload_list as list_views
from apps.web.views import workloads as views

urlpatterns = [
    path("", views.home, name="home"),
    path("notifications/", notification_views.notices, name="notices"),
    path("notifications/read/", notification_views.notices_read, name="notices-read"),
    path(
        "notifications/preferences/",
        notification_views.preferences,
        name="notification-preferences",
    ),
    path(
        "partials/dashboard/workloads/",
        views.dashboard_workloads_partial,
        name="dashboard-workloads",
    ),
    path(
        "partials/dashboard/capacity/",
        views.dashboard_capacity_partial,
        name="dashboard-capacity",
    ),
    path("workloads/", list_views.workload_list, name="workload-list"),
    path("workloads/cancel/", list_views.workload_bulk_cancel, name="workload-bulk-cancel"),
    path("workloads/new/", views.workload_new_start, name="workload-new-start"),
    path("workloads/new/<slug:kind>/", views.workload_new, name="workload-new"),
    path(
        "workloads/new/<slug:kind>/gpu/",
        views.workload_new_gpu_fields,
        name="workload-new-gpu",
    ),
    path("workloads/sizing/", views.sizing_helper, name="sizing"),
    path("workloads/templates/", views.template_list, name="template-list"),
    path(
        "workloads/templates/<int:template_id>/delete/",
        views.template_delete,
        name="template-delete",
    ),
    path("workloads/<int:workload_id>/", views.workload_detail, name="workload-detail"),
    path(
        "workloads/<int:workload_id>/status/",
        views.workload_status_partial,
        name="workload-status",
    ),
    path(
        "workloads/<int:workload_id>/events/",
        views.workload_events_partial,
        name="workload-events",
    ),
    path("workloads/<int:workload_id>/logs/", views.workload_logs_partial, name="workload-logs"),
    path(
        "workloads/<int:workload_id>/logs/download/",
        views.workload_logs_download,
        name="workload-logs-download",
    ),
    path(
        "workloads/<int:workload_id>/logs/stream/",
        views.workload_logs_stream,
        name="workload-logs-stream",
    ),
    path(
        "workloads/<int:workload_id>/cancel/",
        views.workload_cancel_view,
        name="workload-cancel",
    ),
    path(
        "workloads/<int:workload_id>/suspend/",
        views.workload_suspend_view,
        name="workload-suspend",
    ),
    path(
        "workloads/<int:workload_id>/resume/",
        views.workload_resume_view,
        name="workload-resume",
    ),
    path("workloads/<int:workload_id>/clone/", views.workload_clone_view, name="workload-clone"),
    path(
        "workloads/<int:workload_id>/open/",
        notebook_views.workload_open,
        name="workload-open",
    ),
    # Asked by the notebooks' ingress (auth-url, auth-signin); namespaces are team-<slug>, so
    # these never meet a notebook's /notebooks/<namespace>/<id>/ path.
    path("notebooks/auth/", notebook_views.notebook_auth, name="notebook-auth"),
    path("notebooks/signin/", notebook_views.notebook_signin, name="notebook-signin"),
    # The team page lives with the accounts app; it is mounted here to get a short URL.
    path("teams/<slug:slug>/", account_views.team_detail, name="team-detail"),
    path("teams/<slug:slug>/datasets/", dataset_views.team_datasets_page, name="team-datasets"),
    path(
        "teams/<slug:slug>/datasets/remove/",
        dataset_views.team_dataset_remove,
        name="team-dataset-remove",
    ),
    path("teams/<slug:slug>/secrets/", credential_views.team_secrets, name="team-secrets"),
    path(
        "teams/<slug:slug>/secrets/rotate/",
        credential_views.team_secret_rotate,
        name="team-secret-rotate",
    ),
    path(
        "teams/<slug:slug>/secrets/delete/",
        credential_views.team_secret_delete,
        name="team-secret-delete",
    ),
]
