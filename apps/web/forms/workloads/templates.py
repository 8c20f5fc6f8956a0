"""Saving a request form's values as a template."""

from __future__ import annotations

from django import forms


class TemplateSaveForm(forms.Form):
    """Saving the request being typed as a named template (prefix ``template``)."""

    name = forms.CharField(
        label="Template name", max_length=100, help_text="e.g. “7B LoRA on a MIG slice”."
    )
    share = forms.BooleanField(
        label="Share with my team", required=False, help_text="Teammates can start from it too."
    )
