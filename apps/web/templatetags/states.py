"""A workload's reason beside its state, said once: ``{% load states %}`` then
``{{ w.last_reason|beside_state:w.get_state_display }}`` gives "" when the reason only
repeats the state ("Running" beside "running")."""

from __future__ import annotations

from django import template

register = template.Library()


def reason_beside_state(reason: str | None, state: str | None) -> str:
    """The reason, or "" when it says no more than the state it is shown next to."""
    text = (reason or "").strip()
    if text.rstrip(".").casefold() == (state or "").strip().casefold():
        return ""
    return text


@register.filter
def beside_state(reason: str | None, state: str | None) -> str:
    return reason_beside_state(reason, state)
