"""Guards for the REST API that run before any view, and the API's one error shape for the
answers Django gives outside DRF (unknown URLs, server errors)."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import unquote

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

API_PREFIX = "/api/"

_CODES = {
    400: ("bad_request", "The request could not be understood."),
    404: ("not_found", "Not found."),
    405: ("method_not_allowed", "This method is not allowed here."),
    500: ("server_error", "The server failed; the error was logged. Try again later."),
    503: ("unavailable", "The server is busy; nothing was done. Retry after the given seconds."),
}


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"code": code, "message": message, "fields": {}}, status=status)


def _too_large(limit: int) -> JsonResponse:
    return _error(413, "too_large", f"The request body is larger than {limit} bytes.")


class ApiBodySizeLimitMiddleware:
    """For paths under /api/:

    * bodies above API_MAX_BODY_BYTES are refused with 413 before anything reads them (the
      declared Content-Length is checked; Django never reads past it). Should a view read
      ``request.body`` beyond DATA_UPLOAD_MAX_MEMORY_SIZE, Django's RequestDataTooBig becomes
      the same 413 instead of a bare 400;
    * a NUL character in the path or query string is refused with 400 (PostgreSQL text cannot
      hold one, so it could only end as a server error further in);
    * Django's own HTML error pages (unknown URL, server error) are replaced by the API's
      error shape, so clients parse one format everywhere.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        limit: int = settings.API_MAX_BODY_BYTES
        raw = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(raw)
        except ValueError:
            return _error(400, "invalid", "Content-Length is not a number.")
        if length > limit:
            return _too_large(limit)
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path or "\x00" in unquote(query):
            return _error(400, "invalid", "The URL contains a NUL character.")
        response = self.get_response(request)
        return self._shaped(response)

    @staticmethod
    def _shaped(response: HttpResponseBase) -> HttpResponseBase:
        if response.status_code < 400 or response.streaming:
            return response
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        code, message = _CODES.get(response.status_code, ("error", "The request failed."))
        shaped = _error(response.status_code, code, message)
        for header in ("Allow", "Retry-After"):
            if header in response:
                shaped[header] = response[header]
        return shaped

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.path.startswith(API_PREFIX) and isinstance(exception, RequestDataTooBig):
            return _too_large(settings.API_MAX_BODY_BYTES)
        return None
