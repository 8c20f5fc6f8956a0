"""A service's ValidationError becomes form errors whatever its shape: by field, or one
message for the whole form (a bare ValidationError once made the secrets page a 500)."""

from __future__ import annotations

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from apps.web.forms.errors import errors_by_field


class NameForm(forms.Form):
    name = forms.CharField()


def _apply(exc: ValidationError) -> NameForm:
    form = NameForm({"name": "x"})
    assert form.is_valid()
    for field, errors in errors_by_field(exc).items():
        form.add_error(field if field in form.fields else None, list(errors))
    return form


def test_errors_with_fields_land_on_their_fields() -> None:
    form = _apply(ValidationError({"name": "Taken.", "elsewhere": "Not a field here."}))
    assert form.errors["name"] == ["Taken."]
    assert form.non_field_errors() == ["Not a field here."]


def test_an_error_without_fields_is_the_forms_own() -> None:
    exc = ValidationError("No cluster is registered to keep the secret in.")
    assert errors_by_field(exc) == {NON_FIELD_ERRORS: [exc.messages[0]]}
    form = _apply(exc)
    assert form.non_field_errors() == ["No cluster is registered to keep the secret in."]
    assert "name" not in form.errors


def test_a_list_of_errors_without_fields_keeps_every_message() -> None:
    form = _apply(ValidationError(["First.", "Second."]))
    assert form.non_field_errors() == ["First.", "Second."]
