"""Request guards that run before any view."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"


def _too_large(limit: int) -> JsonResponse:
    return JsonResponse(
        {
            "code": "too_large",
            "message": f"The request body is larger than {limit} bytes.",
            "fields": {},
        },
        status=413,
    )


class ApiBodySizeLimitMiddleware:
    """Refuse API request bodies above API_MAX_BODY_BYTES with 413 and the API's error shape.

    The declared Content-Length is checked before anything reads the body, so an oversized
    upload costs nothing but its headers; Django never reads past the declared length. Should
    a view read ``request.body`` beyond DATA_UPLOAD_MAX_MEMORY_SIZE, Django's
    RequestDataTooBig becomes the same 413 here instead of a bare 400.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        limit: int = settings.API_MAX_BODY_BYTES
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return JsonResponse(
                {"code": "invalid", "message": "Content-Length is not a number.", "fields": {}},
                status=400,
            )
        if length > limit:
            return _too_large(limit)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX) and isinstance(exception, RequestDataTooBig):
            return _too_large(settings.API_MAX_BODY_BYTES)
        return None
