"""The Django admin's registrations and management commands (an edge)."""

from __future__ import annotations

from django.apps import AppConfig


class AdminsiteConfig(AppConfig):
    name = "apps.adminsite"
    label = "adminsite"
