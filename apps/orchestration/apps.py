from __future__ import annotations

from django.apps import AppConfig


class OrchestrationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.orchestration"
    label = "orchestration"

    def ready(self) -> None:
        from apps.orchestration.handoff import on_scheduling_decisions
        from apps.scheduling.handoff import subscribe

        subscribe(on_scheduling_decisions)
