"""``{% load refusals %}`` then ``{% refusal_of message as refusal %}``: the explanation of a
refused page (``apps.web.refusals``) for a view that renders its own 403 page."""

from __future__ import annotations

from typing import Any

from django import template

from apps.web.refusals import Refusal, refusal_for

register = template.Library()


@register.simple_tag(takes_context=True)
def refusal_of(context: dict[str, Any], message: str = "", status: int = 403) -> Refusal:
    return refusal_for(context["request"], status=status, message=message)
