from __future__ import annotations

from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.telemetry"
    label = "telemetry"

    def ready(self) -> None:
        from apps.telemetry import metrics

        metrics.register()
