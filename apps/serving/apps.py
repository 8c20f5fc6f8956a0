from __future__ import annotations

from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "apps.serving"
    label = "serving"
    verbose_name = "Inference endpoints"
    default_auto_field = "django.db.models.BigAutoField"
