"""One error shape for the whole API: {"code", "message", "fields"}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _flatten(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {
            str(k): [str(x) for x in (v if isinstance(v, list) else [v])] for k, v in detail.items()
        }
    return {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ObjectDoesNotExist | Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, DjangoValidationError):
        detail = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        exc = exceptions.ValidationError(detail)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields: dict[str, list[str]] = _flatten(exc.detail)
        message = (
            "; ".join(f"{k}: {' '.join(v)}" for k, v in fields.items())
            if fields
            else " ".join(
                str(d) for d in (exc.detail if isinstance(exc.detail, list) else [exc.detail])
            )
        )
        body: dict[str, Any] = {
            "code": "invalid",
            "message": message or "Invalid input.",
            "fields": fields,
        }
        response.status_code = status.HTTP_400_BAD_REQUEST
    else:
        text: Any = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        body = {
            "code": code if isinstance(code, str) else "error",
            "message": str(text),
            "fields": {},
        }
    response.data = body
    return response
