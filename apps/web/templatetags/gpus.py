"""``{% load gpus %}`` then ``{{ milli|gpus }}``: milli-GPU as GPUs (2500 → 2.5)."""

from __future__ import annotations

from django import template

from apps.quotas.core import format_milli

register = template.Library()


@register.filter
def gpus(milli: int | None) -> str:
    return "—" if milli is None else format_milli(int(milli))
