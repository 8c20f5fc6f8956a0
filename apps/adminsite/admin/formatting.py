"""Amounts in the admin as the portal shows them: GPUs instead of milli-GPU, GiB instead of
MiB, GPU-hours, percentages and costs with their currency."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings

from apps.budgets.core import money
from apps.catalog.core import format_gib
from apps.quotas.core import format_milli

__all__ = ["cost", "gib", "gpu_hours", "gpus", "percent"]


def gpus(milli: int | None) -> str:
    """2500 → "2.5", None → "—" (the portal's ``gpus`` filter)."""
    return "—" if milli is None else format_milli(int(milli))


def gib(mib: Any) -> str:
    """81920 → "80 GiB" (the portal's ``gib`` filter)."""
    return format_gib(mib)


def gpu_hours(seconds: float | int | None) -> str:
    """GPU-seconds as GPU-hours to two decimals: 5400 → "1.50"."""
    return "—" if seconds is None else f"{seconds / 3600:,.2f}"


def percent(fraction: float | None) -> str:
    """0.8734 → "87%"; None → "—"."""
    return "—" if fraction is None else f"{100 * fraction:.0f}%"


def cost(amount: Any) -> str:
    """12.5 → "12.50 EUR" (the portal's ``money`` filter)."""
    if amount is None or amount == "":
        return "—"
    try:
        return money(Decimal(str(amount)), settings.PLATFORM_CURRENCY)
    except InvalidOperation:
        return "—"
