"""The Django admin's app configuration: Django's own, with this project's admin site.

Kept apart from the site (which imports models) because Django imports this module while it
is still loading the apps; the site is imported later, on first use."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class GpupaasAdminConfig(AdminConfig):
    default_site = "apps.adminsite.site.GpupaasAdminSite"
