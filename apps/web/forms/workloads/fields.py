"""Fields of the request forms that offer choices but pass any value on to the request rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, QuerySet

from apps.accounts.models import Team
from apps.catalog.models import GpuClass, Image


def pk_of(value: Any) -> int | None:
    if isinstance(value, GpuClass | Team | Image):
        return value.pk
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


class CatalogChoiceField(forms.ModelChoiceField):
    """Offers (renders) its queryset, but accepts any row of ``lookup``: a class or an image
    that is withdrawn, or not for this kind, is refused by the request rules with their
    message (the same the API gives), not as "not one of the choices"."""

    def __init__(self, *args: Any, lookup: QuerySet[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lookup = lookup
        self.describe: Callable[[Any], str] | None = None  # an option's label, if not str()

    def label_from_instance(self, obj: Any) -> str:
        return self.describe(obj) if self.describe is not None else super().label_from_instance(obj)

    def to_python(self, value: Any) -> Model | None:
        if value in self.empty_values:
            return None
        try:
            found: Model = self.lookup.get(pk=value)
        except (ValueError, TypeError, ObjectDoesNotExist, forms.ValidationError):
            raise forms.ValidationError(
                self.error_messages["invalid_choice"], code="invalid_choice"
            ) from None
        return found


class RuleChoiceField(forms.ChoiceField):
    """Renders its choices (what the user may pick); any value is passed on for the request
    rules to judge."""

    def validate(self, value: Any) -> None:
        forms.Field.validate(self, value)


def env_field() -> forms.CharField:
    """The environment variables box every request form has (one NAME=value per line)."""
    return forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One NAME=value per line.",
    )
