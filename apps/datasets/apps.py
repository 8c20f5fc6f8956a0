from __future__ import annotations

from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.datasets"
    label = "datasets"
    verbose_name = "Datasets"
