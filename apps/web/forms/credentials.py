"""The Secrets page's forms: a value goes in once, as a password field, and is never shown."""

from __future__ import annotations

from typing import Any

from django import forms

from apps.credentials import core


class SecretValueForm(forms.Form):
    """One key and its value (more keys: the API or the CLI)."""

    key = forms.CharField(
        initial="token",
        max_length=core.MAX_KEY_LENGTH,
        help_text="The key inside the secret; requests name it (e.g. hf:HF_TOKEN=token).",
    )
    value = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Written to your team's namespace in the cluster; never shown again.",
    )

    def data_value(self) -> dict[str, Any]:
        return {self.cleaned_data["key"]: self.cleaned_data["value"]}


class SecretCreateForm(SecretValueForm):
    name = forms.CharField(
        max_length=core.MAX_NAME_LENGTH,
        help_text="Lower-case letters, digits and -, e.g. hf or wandb. Requests refer to it "
        "by this name.",
    )
    personal = forms.BooleanField(
        required=False,
        label="Personal (only you can use it)",
        help_text="Otherwise a team secret: leads and admins write it, every member may use it.",
    )

    field_order = ["name", "personal", "key", "value"]
