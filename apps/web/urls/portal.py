from __future__ import annotations

from django.urls import path

from apps.web.views import accounts as account_views
from apps.web.views import capacity as capacity_views
from apps.web.views import credentials as credential_views
from apps.web.views import datasets as dataset_views
from apps.web.views import endpoints as endpoint_views
from apps.web.views import governance as governance_views
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
    path("overview/", governance_views.overview_page, name="governance-overview"),
    path("overview/quotas/", governance_views.quota_edit, name="governance-quota-edit"),
    path("overview/advice/", governance_views.advice_page, name="governance-advice"),
    path(
        "overview/advice/apply/", governance_views.advice_apply_view, name="governance-advice-apply"
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
    path(
        "workloads/new/<slug:kind>/verdict/",
        views.workload_new_verdict,
        name="workload-new-verdict",
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
    # Asked by a notebook's Gateway API route, which names the notebook it serves (Traefik's
    # forwardAuth; an ExternalAuth filter adds the request's own path after it).
    path(
        "notebooks/auth/<int:workload_id>/",
        notebook_views.notebook_route_auth,
        name="notebook-route-auth",
    ),
    path(
        "notebooks/auth/<int:workload_id>/<path:forwarded>",
        notebook_views.notebook_route_auth,
        name="notebook-route-auth-forwarded",
    ),
    path("notebooks/signin/", notebook_views.notebook_signin, name="notebook-signin"),
    # Asked by the endpoints' ingress (auth-url) with the endpoint's id.
    path("endpoints/auth/<int:workload_id>/", endpoint_views.endpoint_auth, name="endpoint-auth"),
    path(
        "workloads/<int:workload_id>/endpoint/",
        endpoint_views.endpoint_panel,
        name="endpoint-panel",
    ),
    path(
        "workloads/<int:workload_id>/scale/",
        endpoint_views.endpoint_scale_view,
        name="endpoint-scale",
    ),
    path(
        "workloads/<int:workload_id>/wake/", endpoint_views.endpoint_wake_view, name="endpoint-wake"
    ),
    path(
        "workloads/<int:workload_id>/rollout/",
        endpoint_views.endpoint_rollout_view,
        name="endpoint-rollout",
    ),
    path(
        "workloads/<int:workload_id>/keys/",
        endpoint_views.endpoint_key_create_view,
        name="endpoint-key-create",
    ),
    path(
        "workloads/<int:workload_id>/keys/<int:key_id>/revoke/",
        endpoint_views.endpoint_key_revoke_view,
        name="endpoint-key-revoke",
    ),
    # The team page lives with the accounts app; it is mounted here to get a short URL.
    path("teams/<slug:slug>/", account_views.team_detail, name="team-detail"),
    path("teams/<slug:slug>/policy/", governance_views.team_policy, name="team-policy"),
    path(
        "teams/<slug:slug>/policy/set/",
        governance_views.team_policy_set_view,
        name="team-policy-set",
    ),
    path("teams/<slug:slug>/budget/", governance_views.team_budget, name="team-budget"),
    path("teams/<slug:slug>/budget/set/", governance_views.team_budget_set, name="team-budget-set"),
    path(
        "teams/<slug:slug>/budget/approve/",
        governance_views.team_budget_approve,
        name="team-budget-approve",
    ),
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
    path("quota-requests/", capacity_views.quota_requests_page, name="quota-requests"),
    path(
        "quota-requests/<int:request_id>/",
        capacity_views.quota_request_detail,
        name="quota-request-detail",
    ),
    path(
        "quota-requests/<int:request_id>/withdraw/",
        capacity_views.quota_request_withdraw,
        name="quota-request-withdraw",
    ),
    path("reservations/", capacity_views.reservations_page, name="reservations"),
    path(
        "reservations/<int:reservation_id>/decide/",
        capacity_views.reservation_decide_view,
        name="reservation-decide",
    ),
    path(
        "reservations/<int:reservation_id>/withdraw/",
        capacity_views.reservation_withdraw,
        name="reservation-withdraw",
    ),
]
