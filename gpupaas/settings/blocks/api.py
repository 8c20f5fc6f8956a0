"""The REST API: rate limits and their store, body and page sizes, idempotency, personal
tokens, log streams, and Django REST framework's and the OpenAPI schema's settings."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import env_bool, env_int, env_rate, env_str

# Rates are "<count>/<s|sec|m|min|h|hour|d|day>"; over one, the answer is 429 with Retry-After.
# Per user: every token and session of one person share this budget.
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "600/min")
# Per client address (see TRUSTED_PROXY_COUNT), whoever is signed in; also the budget of
# callers without credentials.
API_RATE_LIMIT_PER_ADDRESS = env_rate("API_RATE_LIMIT_PER_ADDRESS", "1200/min")
# Failed API authentications (unknown, revoked, expired or malformed tokens) per client
# address; over it, every token from that address gets 429 until the window passes.
API_AUTH_FAILURE_LIMIT = env_rate("API_AUTH_FAILURE_LIMIT", "20/min")
# When the rate-limit store cannot be reached: refuse API writes and admin password sign-ins
# with 503 (API reads still pass). false lets everything through, uncounted, until it is back.
API_RATE_LIMIT_FAIL_CLOSED_WRITES = env_bool("API_RATE_LIMIT_FAIL_CLOSED_WRITES", True)


def rate_limit_store(default: str) -> str:
    """Where the rate-limit counters live: "local" (per process: development and tests) or
    "redis" (shared by every web process, at REDIS_URL; production's default)."""
    store = env_str("API_RATE_LIMIT_STORE", default)
    if store not in ("local", "redis"):
        raise ImproperlyConfigured(f"API_RATE_LIMIT_STORE={store!r} must be local or redis.")
    return store


API_RATE_LIMIT_STORE = rate_limit_store("local")
# Request bodies above this size are refused with 413 before they are read.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 50, minimum=1)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 200, minimum=1)
# How long a retried POST with the same Idempotency-Key returns the first result.
API_IDEMPOTENCY_TTL_SECONDS = env_int("API_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=60)
# Personal API tokens: the longest lifetime a new token may have, in days (0: no limit, and
# "never expires" may be chosen). A token asked for without an expiry gets the longest
# allowed; one that is older than this stops working even if it was created without one.
API_TOKEN_MAX_LIFETIME_DAYS = env_int("API_TOKEN_MAX_LIFETIME_DAYS", 365, minimum=0)
# Live (neither revoked nor expired) tokens one person may hold.
API_TOKEN_MAX_PER_USER = env_int("API_TOKEN_MAX_PER_USER", 20, minimum=1)

# Log streams (API follow, the portal's live view; apps/common/streams.py): how many one
# person may hold open at once in a web process (one more is answered 429), the longest one
# stays open (it then ends with a message saying so), and the seconds without a line after
# which the portal's live view sends a keep-alive comment.
STREAMS_PER_USER = env_int("STREAMS_PER_USER", 4, minimum=1)
STREAM_MAX_SECONDS = env_int("STREAM_MAX_SECONDS", 3600, minimum=1)
STREAM_HEARTBEAT_SECONDS = env_int("STREAM_HEARTBEAT_SECONDS", 15, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps.api.authentication.TokenScopePermission",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.base.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": API_RATE_LIMIT},
    "DEFAULT_RENDERER_CLASSES": ["apps.api.renderers.FastJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.api.renderers.FastJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.api.base.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gpupaas API",
    "DESCRIPTION": (
        "Self-service GPUs: submit notebooks, training jobs and sweeps, follow them, and see "
        "your teams' quotas. Authenticate with a personal token "
        "(`Authorization: Bearer gpp_…`, created in the portal under API tokens); a token "
        "with the read scope may only read. Every error has the same shape: "
        '`{"code", "message", "fields"}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed package, so the docs work without internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStateEnum": "apps.workloads.models.Workload.State",
        "WorkloadKindEnum": "apps.workloads.models.Workload.Kind",
        "PriorityClassEnum": "apps.workloads.models.Workload.Priority",
        "QuotaRequestStateEnum": "apps.quotas.models.QuotaRequest.State",
        "QuotaRequestKindEnum": "apps.quotas.models.QuotaRequest.Kind",
        "ReservationStateEnum": "apps.reservations.models.Reservation.State",
        "NoticeEventEnum": "apps.api.views.notifications.EVENTS",
    },
}
