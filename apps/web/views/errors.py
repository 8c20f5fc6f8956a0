"""The server's answer to an unhandled error: Django's own 500, except when the broker could
not be reached (a 503 that says the write was not done, apps.common.taskqueue) or the database was
only busy (every pooled connection of the worker taken for DATABASE_POOL_TIMEOUT seconds):
then a 503 with Retry-After, which clients and proxies retry, not a server error. The API's
middleware gives both the API's error shape.

A refused page (403) or one not found (404) tells a signed-in person why, whose it is and whom
to ask (``apps.web.refusals``); others, and the API, get Django's own answer."""

from __future__ import annotations

import sys

import psycopg
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.html import escape
from django.views import defaults
from psycopg_pool import PoolTimeout

from apps.common.taskqueue import BrokerUnreachable
from apps.web.refusals import refusal_for

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


UNREACHABLE_MESSAGE = (
    "The database cannot be reached; nothing was done. Try again in a minute, or tell the "
    "platform team if it lasts."
)
UNAVAILABLE_PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Unavailable</title>'
    "</head><body><main><h1>The portal is unavailable</h1><p>{message}</p></main></body></html>"
)
UNREACHABLE_PAGE = UNAVAILABLE_PAGE.format(message=UNREACHABLE_MESSAGE)


def database_unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc`` is (or was raised from) a failure to connect to PostgreSQL at all (the
    server down, refusing, or not answering within DATABASE_CONNECT_TIMEOUT)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, psycopg.OperationalError):
            text = str(exc)
            return text.startswith("connection ") or "timeout expired" in text
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _broker_unreachable_answer(request: HttpRequest, exc: BrokerUnreachable) -> HttpResponse:
    """The write was rolled back (apps.common.taskqueue): say so, and that a retry is safe."""
    response: HttpResponse
    if request.path.startswith("/api/"):
        body = {"code": exc.code, "message": str(exc), "fields": {}}
        response = JsonResponse(body, status=503)
    else:
        response = HttpResponse(
            UNAVAILABLE_PAGE.format(message=escape(str(exc))),
            status=503,
            content_type="text/html; charset=utf-8",
        )
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    error = sys.exc_info()[1]
    if isinstance(error, BrokerUnreachable):
        return _broker_unreachable_answer(request, error)
    if database_unreachable(error):
        response: HttpResponse
        if request.path.startswith("/api/"):
            body = {"code": "database_unreachable", "message": UNREACHABLE_MESSAGE, "fields": {}}
            response = JsonResponse(body, status=503)
        else:
            response = HttpResponse(
                UNREACHABLE_PAGE, status=503, content_type="text/html; charset=utf-8"
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if database_busy(error):
        response = HttpResponse(BUSY_PAGE, status=503, content_type="text/html; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return defaults.server_error(request)


# Django's own words for a refusal without a message of the view's: not worth showing.
GENERIC_MESSAGES = {"", "Forbidden", "Not Found", "Page not found"}


def _explained(request: HttpRequest, exception: Exception, status: int) -> HttpResponse | None:
    """The refusal page for a signed-in person in the portal; None for anyone else (signed
    out, or an API client, which gets the API's own shape)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or request.path_info.startswith("/api/"):
        return None
    said = str(exception.args[0]) if exception.args else ""
    message = "" if said in GENERIC_MESSAGES or said.startswith("{") else said
    refusal = refusal_for(request, status=status, message=message)
    return render(request, "refused.html", {"refusal": refusal}, status=status)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _explained(request, exception, 403) or defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _explained(request, exception, 404) or defaults.page_not_found(request, exception)
