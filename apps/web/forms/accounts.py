from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.utils import timezone

from apps.accounts import core

EXPIRY_DAYS = [7, 30, 90, 365]


def expiry_choices(max_days: int) -> list[tuple[str, str]]:
    """The lifetimes offered: those within the longest allowed (API_TOKEN_MAX_LIFETIME_DAYS),
    that longest itself, and "Never" only when there is no maximum."""
    if max_days <= 0:
        days = EXPIRY_DAYS
    else:
        days = sorted({d for d in EXPIRY_DAYS if d <= max_days} | {max_days})
    choices = [(str(d), "1 year" if d == 365 else f"{d} day{'s' if d != 1 else ''}") for d in days]
    if max_days <= 0:
        choices.append(("never", "Never"))
    elif max_days not in EXPIRY_DAYS:
        choices[-1] = (str(max_days), f"{max_days} days (the longest allowed)")
    return choices


class ApiTokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What uses it, e.g. “CI pipeline” or “laptop CLI”."
    )
    scopes = forms.MultipleChoiceField(
        choices=[(s, s) for s in core.ALL_SCOPES],
        widget=forms.CheckboxSelectMultiple,
        initial=[core.SCOPE_READ],
        help_text="read: list and inspect; write: also submit, cancel and change (includes read).",
    )
    expiry = forms.ChoiceField(choices=[])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = expiry_choices(settings.API_TOKEN_MAX_LIFETIME_DAYS)
        field: forms.ChoiceField = self.fields["expiry"]  # type: ignore[assignment]
        field.choices = choices
        values = [value for value, _ in choices]
        field.initial = "90" if "90" in values else values[-1]

    def expires_at(self) -> datetime | None:
        value = self.cleaned_data["expiry"]
        if value == "never":
            return None
        return timezone.now() + timedelta(days=int(value))
