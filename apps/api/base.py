"""What every API endpoint shares: one error shape {"code", "message", "fields"}, the rate
limits, pagination, and the pieces of the OpenAPI description that say so."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, inline_serializer
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import exception_handler as drf_exception_handler

from apps.api.params import page_number
from apps.common.http import client_ip
from apps.common.ratelimit import rate_limiter
from apps.common.taskqueue import BrokerUnreachable
from apps.orchestration.errors import ClusterError, cluster_error_answer, cluster_retry_after

# Seconds a client is told to wait when the broker cannot be reached.
BROKER_RETRY_AFTER_SECONDS = 30


def _flatten(detail: Any) -> dict[str, list[str]]:
    if isinstance(detail, dict):
        return {
            str(k): [detail_text(x) for x in (v if isinstance(v, list) else [v]) if x]
            for k, v in detail.items()
        }
    return {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, BrokerUnreachable):
        # The write was rolled back (apps.common.taskqueue): the client may simply retry.
        busy = Response(error_body(code=exc.code, message=str(exc)), status=503)
        busy["Retry-After"] = str(BROKER_RETRY_AFTER_SECONDS)
        return busy
    if isinstance(exc, ClusterError):
        # The same status and words as the portal's (apps.orchestration.errors).
        answer = cluster_error_answer(exc)
        refused = Response(error_body(code=exc.code, message=answer.message), status=answer.status)
        retry_after = cluster_retry_after(exc)
        if retry_after:
            refused["Retry-After"] = str(retry_after)
        return refused
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
            else detail_text(exc.detail)
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
            "message": detail_text(text),
            "fields": {},
        }
    # An answer with more to say than a message (e.g. the workloads a submission would preempt).
    body.update(getattr(exc, "body_extra", None) or {})
    if isinstance(exc, exceptions.Throttled):
        # DRF writes "0" for waits under a second; a client must always wait at least 1 s.
        wait = getattr(exc, "wait", None) or 1
        response["Retry-After"] = str(max(1, math.ceil(wait)))
    response.data = body
    return response


def detail_text(detail: Any) -> str:
    """An exception's detail as words: nested lists and dicts of DRF's ``ErrorDetail`` joined
    into one sentence (never their Python repr)."""
    if isinstance(detail, dict):
        return " ".join(
            f"{key}: {detail_text(value)}"
            if key not in ("detail", "non_field_errors")
            else detail_text(value)
            for key, value in detail.items()
        )
    if isinstance(detail, list | tuple):
        return " ".join(detail_text(item) for item in detail)
    return str(detail)


def error_body(*, code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict:
    """The error shape, for the few answers built outside DRF (middleware, streaming)."""
    return {"code": code, "message": message, "fields": fields or {}}


class Conflict(exceptions.APIException):
    """The request is valid but the resource is not in a state that allows it now."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


# --- rate limiting ---------------------------------------------------------------------------


class RateLimitStoreDown(exceptions.APIException):
    """The rate-limit store cannot be reached and API_RATE_LIMIT_FAIL_CLOSED_WRITES is on."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = (
        "Changes are refused for now: the rate-limit store cannot be reached. "
        "Reading still works; try again in a minute."
    )
    default_code = "unavailable"


class TokenRateThrottle(BaseThrottle):
    """API_RATE_LIMIT per user (every token and portal session of one person share it) and
    API_RATE_LIMIT_PER_ADDRESS per client address, signed in or not. DRF checks throttles
    after authentication and permissions, so a request without valid credentials is answered
    401 before it counts here (failed authentications have their own count, see
    :class:`apps.api.authentication.ApiTokenAuthentication`). The counting is
    :mod:`apps.common.ratelimit`'s: atomic, and shared by all web processes with
    API_RATE_LIMIT_STORE=redis.

    When the store cannot be reached, reads pass and writes get 503
    (API_RATE_LIMIT_FAIL_CLOSED_WRITES, on by default): an outage of the store must not
    become an unlimited window for changes.
    """

    def __init__(self) -> None:
        self._retry_after: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        # The rates are read at request time, so a test (or an operator's override) takes
        # effect at once.
        limiter = rate_limiter()
        address = f"ip:{client_ip(request) or 'unknown'}"
        budgets = [(str(settings.API_RATE_LIMIT_PER_ADDRESS), address)]
        if request.user and request.user.is_authenticated:
            budgets.insert(0, (str(settings.API_RATE_LIMIT), f"user:{request.user.pk}"))
        for rate, key in budgets:
            decision = limiter.hit(rate, key)
            if decision.store_down:
                write = request.method not in permissions.SAFE_METHODS
                if write and settings.API_RATE_LIMIT_FAIL_CLOSED_WRITES:
                    raise RateLimitStoreDown()
                return True
            if not decision.allowed:
                self._retry_after = decision.retry_after
                return False
        return True

    def wait(self) -> float | None:
        return self._retry_after


# --- pagination ------------------------------------------------------------------------------


class PagePagination(PageNumberPagination):
    """``?page=N&page_size=M`` (default API_PAGE_SIZE, at most API_MAX_PAGE_SIZE)."""

    page_size_query_param = "page_size"

    def __init__(self) -> None:
        self.page_size = settings.API_PAGE_SIZE
        self.max_page_size = settings.API_MAX_PAGE_SIZE

    def get_page_number(self, request: Request, paginator: Any) -> int | str:
        """The page asked for: a number (ASCII digits, 1 … MAX_PAGE) or "last"; anything else
        is a 400 naming ``page``."""
        number = page_number(request, self.page_query_param)
        return paginator.num_pages if number in self.last_page_strings else number

    def requested_slice(self, request: Request) -> tuple[int, int] | None:
        """(offset, limit) of the page asked for, when it is given as a number (or not at
        all); None for "last", which the paginator must resolve itself."""
        number = page_number(request, self.page_query_param)
        if isinstance(number, str):
            return None
        size = self.get_page_size(request) or settings.API_PAGE_SIZE
        return (number - 1) * size, size


# --- OpenAPI ---------------------------------------------------------------------------------

ERROR_SERIALIZER = inline_serializer(
    name="Error",
    fields={
        "code": serializers.CharField(help_text="Machine-readable, e.g. not_found, invalid."),
        "message": serializers.CharField(help_text="What went wrong, in words for people."),
        "fields": serializers.DictField(
            child=serializers.ListField(child=serializers.CharField()),
            help_text="Per-field messages for invalid input; empty otherwise.",
        ),
    },
)

_ERROR_EXAMPLES: dict[int, tuple[str, str, dict[str, list[str]]]] = {
    400: (
        "invalid",
        "gpu_milli: More than one GPU per replica must be whole GPUs (2000, 3000, …), not 1500.",
        {
            "gpu_milli": [
                "More than one GPU per replica must be whole GPUs (2000, 3000, …), not 1500."
            ]
        },
    ),
    401: ("not_authenticated", "Authentication credentials were not provided.", {}),
    403: (
        "permission_denied",
        "This token has the read scope only; create a token with the write scope.",
        {},
    ),
    404: ("not_found", "Not found.", {}),
    409: ("conflict", "No pod is running for this workload, so there are no logs yet.", {}),
    413: ("too_large", "The request body is larger than 1048576 bytes.", {}),
    422: (
        "cluster_refused",
        'The cluster refused: Job.batch "wl-42" is invalid: spec.template.spec.containers[0]'
        ".image: Required value",
        {},
    ),
    429: ("throttled", "Request was throttled. Expected available in 12 seconds.", {}),
    503: ("cluster_unreachable", "The cluster cannot be reached; try again in a moment.", {}),
}

_ERROR_DESCRIPTIONS = {
    400: "Invalid input; `fields` names each problem.",
    401: "No valid token or session.",
    403: "Not allowed: a read-only token writing, or not the owner, a team lead or an admin.",
    404: "No such object, or it belongs to a team you are not in.",
    409: "Not possible in the object's current state, or the cluster refused it.",
    413: "The request body is too large.",
    422: "The cluster found the request invalid; the message is the API server's.",
    429: "Rate limit reached; retry after the seconds in Retry-After.",
    503: (
        "The cluster is unreachable, or a write came while the rate-limit store is down "
        "(reads still work); try again in a moment."
    ),
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """OpenAPI responses for these error statuses (400, 401 and 429 are always possible: a
    malformed URL, no credentials, too many requests)."""
    wanted = sorted({400, 401, 429, *codes})
    return {
        c: OpenApiResponse(
            response=ERROR_SERIALIZER,
            description=_ERROR_DESCRIPTIONS[c],
            examples=[
                OpenApiExample(
                    f"error {c}",
                    value=error_body(
                        code=_ERROR_EXAMPLES[c][0],
                        message=_ERROR_EXAMPLES[c][1],
                        fields=_ERROR_EXAMPLES[c][2],
                    ),
                    response_only=True,
                    status_codes=[str(c)],
                )
            ],
        )
        for c in wanted
    }
