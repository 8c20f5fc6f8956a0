from __future__ import annotations

from datetime import datetime, timedelta

from django import forms
from django.utils import timezone

from apps.accounts import core

EXPIRY_CHOICES = [
    ("7", "7 days"),
    ("30", "30 days"),
    ("90", "90 days"),
    ("365", "1 year"),
    ("never", "Never"),
]


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
    expiry = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="90")

    def expires_at(self) -> datetime | None:
        value = self.cleaned_data["expiry"]
        if value == "never":
            return None
        return timezone.now() + timedelta(days=int(value))
