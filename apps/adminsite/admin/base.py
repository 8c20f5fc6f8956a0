"""What every writing admin shares: forms, inlines and actions hand each write to a service, so
the audit trail and the cluster follow whichever screen was used.

* :class:`ServiceAdmin` refuses to save or delete anything itself: a subclass implements
  ``save_model`` and ``delete_model`` with a service call; the bulk "delete selected" action
  goes row by row through ``delete_model``; many-to-many values are the service's to write.
* An inline's formset is a :class:`ServiceFormSet`: ``save_through_services`` writes its new,
  changed and deleted rows with service calls. An inline whose formset is not one cannot save.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.widgets import AutocompleteSelect
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import models
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from apps.accounts.models import User
from apps.common.http import client_ip


def actor(request: HttpRequest) -> User | None:
    """The signed-in admin, as services expect the acting user."""
    return request.user if isinstance(request.user, User) else None


def source_ip(request: HttpRequest) -> str | None:
    return client_ip(request)


class ServiceFormSet(BaseInlineFormSet):
    """An inline formset whose rows are written by services, never by ``formset.save()``."""

    def pending(self) -> tuple[list[models.Model], list[models.Model]]:
        """The rows to create or change (the parent set on new ones) and the rows to delete.
        Nothing is written."""
        self.save(commit=False)
        saved = [*self.new_objects, *(obj for obj, _ in self.changed_objects)]
        return saved, list(self.deleted_objects)

    def save_through_services(self, request: HttpRequest) -> list[str]:
        """Write the pending rows with service calls; return warnings to show the admin."""
        raise NotImplementedError


class KeyLockedForm(forms.ModelForm):
    """An inline row whose identifying fields (``locked``) are fixed once it exists: a row is
    deleted and added again rather than moved to another team or class."""

    locked: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            for name in self.locked:
                if name in self.fields:
                    self.fields[name].disabled = True


class SafeAutocompleteSelect(AutocompleteSelect):
    """Django's autocomplete widget, except that a submitted value that is no key of the related
    model (" ", "²" for an id) is shown as nothing chosen: Django's own looks it up as it
    re-renders the form with its errors and fails (ValueError, a server error)."""

    def optgroups(self, name: str, value: Any, attrs: Any = None) -> Any:
        remote = self.field.remote_field
        target = remote.model._meta.get_field(getattr(remote, "field_name", None) or "pk")
        kept = []
        for item in value:
            try:
                target.to_python(item)
            except (ValidationError, ValueError, TypeError):
                continue
            kept.append(item)
        return super().optgroups(name, kept, attrs)


class SafeAutocompleteMixin:
    """For a ModelAdmin or an inline with ``autocomplete_fields``: :class:`SafeAutocompleteSelect`
    as their widget."""

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name in self.get_autocomplete_fields(request):  # type: ignore[attr-defined]
            kwargs.setdefault(
                "widget",
                SafeAutocompleteSelect(
                    db_field,
                    self.admin_site,  # type: ignore[attr-defined]
                    using=kwargs.get("using"),
                ),
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]


class ServiceAdmin(SafeAutocompleteMixin, admin.ModelAdmin):
    """A ModelAdmin that writes only through services."""

    # Whether ``save_model`` hands the form's many-to-many values to its service.
    saves_many_to_many = False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        raise NotImplementedError(f"{type(self).__name__} must save through a service")

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must delete through a service")

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        # Row by row, so every deletion is its service's (Django's default is one bulk DELETE).
        for obj in queryset:
            self.delete_model(request, obj)

    def related_warnings(self, request: HttpRequest, form: Any) -> list[str]:
        """Warnings to show once the row and its inlines are saved."""
        return []

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        opts = self.model._meta
        if not self.saves_many_to_many and any(f.name in form.fields for f in opts.many_to_many):
            raise ImproperlyConfigured(
                f"{type(self).__name__}: many-to-many fields must be saved by the service"
            )
        warnings: list[str] = []
        for formset in formsets:
            warnings += self._save_inline(request, formset)
        warnings += self.related_warnings(request, form)
        for warning in dict.fromkeys(warnings):
            messages.warning(request, warning)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for warning in self._save_inline(request, formset):
            messages.warning(request, warning)

    def _save_inline(self, request: HttpRequest, formset: Any) -> list[str]:
        if isinstance(formset, ServiceFormSet):
            return formset.save_through_services(request)
        if formset.has_changed() or getattr(formset, "deleted_forms", None):
            raise ImproperlyConfigured(
                f"{type(self).__name__}: the {formset.model._meta.label} inline has no service"
            )
        return []
