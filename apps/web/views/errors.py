"""The server's answer to an unhandled error: Django's own 500, except when the database was
only busy (every pooled connection of the worker taken for DATABASE_POOL_TIMEOUT seconds):
then a 503 with Retry-After, which clients and proxies retry, not a server error. The API's
middleware gives both the API's error shape."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse
from django.views import defaults
from psycopg_pool import PoolTimeout

RETRY_AFTER_SECONDS = 5

BUSY_PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Busy</title></head>'
    "<body><main><h1>The portal is busy</h1><p>Every database connection was in use. "
    "Nothing was lost: try again in a few seconds.</p></main></body></html>"
)


def database_busy(exc: BaseException | None) -> bool:
    """Whether ``exc`` is (or was raised from) a wait for a pooled connection that ran out."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, PoolTimeout):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def server_error(request: HttpRequest) -> HttpResponse:
    if database_busy(sys.exc_info()[1]):
        response = HttpResponse(BUSY_PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return defaults.server_error(request)
