from __future__ import annotations

from django.urls import path

from apps.web.views import telemetry as views

app_name = "telemetry"

urlpatterns = [
    path("", views.usage_home, name="home"),
    path("teams/<slug:slug>/", views.team_usage, name="team"),
    path("heatmap/", views.heatmap, name="heatmap"),
    path("idle/", views.idle_list, name="idle"),
    path("chargeback/", views.chargeback, name="chargeback"),
    path("workloads/<int:workload_id>/", views.workload_usage, name="workload"),
    path("workloads/<int:workload_id>/series.json", views.workload_series, name="workload-series"),
    path("workloads/<int:workload_id>/resume/", views.workload_resume_view, name="resume"),
]
