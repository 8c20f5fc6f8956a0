"""A service's ValidationError as form errors, whatever its shape."""

from __future__ import annotations

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError


def errors_by_field(exc: ValidationError) -> dict[str, list[str]]:
    """Field → messages of a ValidationError raised by a service. One raised without fields
    (a message about the whole request, e.g. no cluster to keep a secret in) comes back under
    ``NON_FIELD_ERRORS``, which no form has as a field: views show it as the form's own error
    instead of failing on ``message_dict``."""
    if hasattr(exc, "error_dict"):
        return {field: list(messages) for field, messages in exc.message_dict.items()}
    return {NON_FIELD_ERRORS: list(exc.messages)}
