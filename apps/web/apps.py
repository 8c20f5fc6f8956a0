"""The browser portal: HTML views, forms, URLs and template tags (an edge)."""

from __future__ import annotations

from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "apps.web"
    label = "web"
