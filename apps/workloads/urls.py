from __future__ import annotations

from django.urls import path

from apps.workloads import views

urlpatterns = [
    path("", views.home, name="home"),
    path("workloads/<int:workload_id>/", views.workload_detail, name="workload-detail"),
]
