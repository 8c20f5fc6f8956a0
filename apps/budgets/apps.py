from __future__ import annotations

from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.budgets"
    label = "budgets"
    verbose_name = "Budgets"
