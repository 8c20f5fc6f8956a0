"""Template tags other pages use to show telemetry: ``{% load telemetry %}`` then
``{% idle_notices %}`` (the signed-in user's open idle warnings and suspensions, with a Resume
button) or ``{% workload_usage_charts workload %}`` (the per-workload GPU charts)."""

from __future__ import annotations

from typing import Any

from django import template

from apps.telemetry import selectors
from apps.workloads.models import Workload

register = template.Library()


@register.inclusion_tag("telemetry/_notices.html", takes_context=True)
def idle_notices(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"notices": []}
    return {
        "notices": list(selectors.open_notices_for(user)[:10]),
        "csrf_token": context.get("csrf_token"),
    }


@register.filter
def heat_class(cell: selectors.HeatCell) -> str:
    """The heat map's colour class of a GPU: ``heat-free`` when nothing is on it, else
    ``heat-nodata`` when its GPU exports no utilisation, else ``heat-0`` (idle, red) …
    ``heat-10`` (busy, green) by tenths of utilisation."""
    if not cell.reported:
        return "heat-nodata"
    if not cell.pods:
        return "heat-free"
    if cell.utilisation is None:
        return "heat-nodata"
    return f"heat-{round(10 * min(1.0, max(0.0, cell.utilisation or 0.0)))}"


@register.inclusion_tag("telemetry/_workload_charts.html")
def workload_usage_charts(workload: Workload) -> dict[str, Any]:
    return {"workload": workload, "usage": selectors.usage_of(workload)}
