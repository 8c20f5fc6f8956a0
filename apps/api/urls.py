from __future__ import annotations

from django.urls import path

from apps.api.views import accounts as accounts_api
from apps.api.views import capacity as capacity_api
from apps.api.views import catalog as catalog_api
from apps.api.views import credentials as credentials_api
from apps.api.views import datasets as datasets_api
from apps.api.views import endpoints as endpoints_api
from apps.api.views import governance as governance_api
from apps.api.views import notifications as notifications_api
from apps.api.views import quotas as quotas_api
from apps.api.views import telemetry as telemetry_api
from apps.api.views import workloads as workloads_api

app_name = "api"

urlpatterns = [
    path("me/", accounts_api.MeView.as_view(), name="me"),
    path(
        "me/notification-preferences/",
        notifications_api.NotificationPreferencesView.as_view(),
        name="notification-preferences",
    ),
    path("notifications/", notifications_api.NoticeListView.as_view(), name="notifications"),
    path(
        "notifications/read/",
        notifications_api.NoticeReadAllView.as_view(),
        name="notifications-read",
    ),
    path(
        "notifications/<int:notice_id>/read/",
        notifications_api.NoticeReadView.as_view(),
        name="notification-read",
    ),
    path("tokens/", accounts_api.TokenListView.as_view(), name="tokens"),
    path("tokens/<int:token_id>/", accounts_api.TokenDetailView.as_view(), name="token-detail"),
    # workloads
    path("workloads/", workloads_api.WorkloadListView.as_view(), name="workloads"),
    path(
        "workloads/validate/",
        workloads_api.WorkloadValidateView.as_view(),
        name="workloads-validate",
    ),
    path(
        "workloads/<int:workload_id>/",
        workloads_api.WorkloadDetailView.as_view(),
        name="workload-detail",
    ),
    path(
        "workloads/<int:workload_id>/trials/",
        workloads_api.WorkloadTrialsView.as_view(),
        name="workload-trials",
    ),
    path(
        "workloads/<int:workload_id>/cancel/",
        workloads_api.WorkloadCancelView.as_view(),
        name="workload-cancel",
    ),
    path(
        "workloads/<int:workload_id>/suspend/",
        workloads_api.WorkloadSuspendView.as_view(),
        name="workload-suspend",
    ),
    path(
        "workloads/<int:workload_id>/resume/",
        workloads_api.WorkloadResumeView.as_view(),
        name="workload-resume",
    ),
    path(
        "workloads/<int:workload_id>/clone/",
        workloads_api.WorkloadCloneView.as_view(),
        name="workload-clone",
    ),
    path(
        "workloads/<int:workload_id>/logs/",
        workloads_api.WorkloadLogsView.as_view(),
        name="workload-logs",
    ),
    path(
        "workloads/<int:workload_id>/events/",
        workloads_api.WorkloadEventsView.as_view(),
        name="workload-events",
    ),
    # inference endpoints
    path(
        "workloads/<int:workload_id>/endpoint/",
        endpoints_api.EndpointView.as_view(),
        name="endpoint",
    ),
    path(
        "workloads/<int:workload_id>/scale/",
        endpoints_api.EndpointScaleView.as_view(),
        name="endpoint-scale",
    ),
    path(
        "workloads/<int:workload_id>/wake/",
        endpoints_api.EndpointWakeView.as_view(),
        name="endpoint-wake",
    ),
    path(
        "workloads/<int:workload_id>/rollout/",
        endpoints_api.EndpointRolloutView.as_view(),
        name="endpoint-rollout",
    ),
    path(
        "workloads/<int:workload_id>/keys/",
        endpoints_api.EndpointKeysView.as_view(),
        name="endpoint-keys",
    ),
    path(
        "workloads/<int:workload_id>/keys/<int:key_id>/",
        endpoints_api.EndpointKeyDetailView.as_view(),
        name="endpoint-key-detail",
    ),
    # teams and quotas
    path("teams/", accounts_api.TeamListView.as_view(), name="teams"),
    path("teams/<slug:slug>/", accounts_api.TeamDetailView.as_view(), name="team-detail"),
    path(
        "teams/<slug:slug>/members/",
        accounts_api.TeamMemberListView.as_view(),
        name="team-members",
    ),
    path(
        "teams/<slug:slug>/members/<str:username>/",
        accounts_api.TeamMemberDetailView.as_view(),
        name="team-member-detail",
    ),
    path(
        "teams/<slug:slug>/secrets/",
        credentials_api.TeamSecretListView.as_view(),
        name="team-secrets",
    ),
    path(
        "teams/<slug:slug>/secrets/<str:name>/",
        credentials_api.TeamSecretDetailView.as_view(),
        name="team-secret-detail",
    ),
    path(
        "teams/<slug:slug>/datasets/",
        datasets_api.TeamDatasetListView.as_view(),
        name="team-datasets",
    ),
    path(
        "teams/<slug:slug>/datasets/<str:name>/",
        datasets_api.TeamDatasetDetailView.as_view(),
        name="team-dataset-detail",
    ),
    path("teams/<slug:slug>/quotas/", quotas_api.TeamQuotaListView.as_view(), name="team-quotas"),
    path("teams/<slug:slug>/usage/", telemetry_api.TeamUsageView.as_view(), name="team-usage"),
    path("teams/<slug:slug>/policy/", governance_api.TeamPolicyView.as_view(), name="team-policy"),
    path("teams/<slug:slug>/budget/", governance_api.TeamBudgetView.as_view(), name="team-budget"),
    path(
        "teams/<slug:slug>/budget/approve/",
        governance_api.TeamBudgetApproveView.as_view(),
        name="team-budget-approve",
    ),
    path("advice/", governance_api.AdviceListView.as_view(), name="advice"),
    path("advice/apply/", governance_api.AdviceApplyView.as_view(), name="advice-apply"),
    path("quotas/", quotas_api.QuotaListView.as_view(), name="quotas"),
    path("usage/", telemetry_api.MyUsageView.as_view(), name="usage"),
    # catalogue
    path("gpu-classes/", catalog_api.GpuClassListView.as_view(), name="gpu-classes"),
    path(
        "gpu-classes/<str:name>/",
        catalog_api.GpuClassDetailView.as_view(),
        name="gpu-class-detail",
    ),
    path("images/", catalog_api.ImageListView.as_view(), name="images"),
    # quota requests and reservations
    path("quota-requests/", capacity_api.QuotaRequestListView.as_view(), name="quota-requests"),
    path(
        "quota-requests/<int:request_id>/",
        capacity_api.QuotaRequestDetailView.as_view(),
        name="quota-request-detail",
    ),
    path(
        "quota-requests/<int:request_id>/decide/",
        capacity_api.QuotaRequestDecideView.as_view(),
        name="quota-request-decide",
    ),
    path(
        "quota-requests/<int:request_id>/cancel/",
        capacity_api.QuotaRequestCancelView.as_view(),
        name="quota-request-cancel",
    ),
    path("reservations/", capacity_api.ReservationListView.as_view(), name="reservations"),
    path(
        "reservations/calendar/",
        capacity_api.ReservationCalendarView.as_view(),
        name="reservations-calendar",
    ),
    path(
        "reservations/<int:reservation_id>/",
        capacity_api.ReservationDetailView.as_view(),
        name="reservation-detail",
    ),
    path(
        "reservations/<int:reservation_id>/decide/",
        capacity_api.ReservationDecideView.as_view(),
        name="reservation-decide",
    ),
    path(
        "reservations/<int:reservation_id>/cancel/",
        capacity_api.ReservationCancelView.as_view(),
        name="reservation-cancel",
    ),
]
