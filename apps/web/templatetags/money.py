"""Costs with their currency: ``{% load money %}`` then ``{{ cost|money }}`` → "12.50 EUR"
(the ``PLATFORM_CURRENCY`` setting)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.conf import settings

register = template.Library()


def money_text(value: Any, places: int = 2) -> str:
    """``12.5`` → "12.50 EUR"; an empty or unreadable value → "–"."""
    if value is None or value == "":
        return "–"
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return "–"
    return f"{amount:,.{places}f} {settings.PLATFORM_CURRENCY}"


@register.filter
def money(value: Any, places: int = 2) -> str:
    return money_text(value, places)
