"""Exit codes scripts can rely on."""

from __future__ import annotations

OK = 0
ERROR = 1  # the server failed (5xx) or something unexpected happened
USAGE = 2  # bad flags or an unreadable spec file
AUTH = 3  # not configured, or the token was refused (401)
FORBIDDEN = 4  # the token or the user may not do this (403)
NOT_FOUND = 5  # no such workload or team (404)
INVALID = 6  # the request was refused: invalid input or a state conflict (400, 409, 413, 422)
RATE_LIMITED = 7  # still rate-limited after retrying (429)
NETWORK = 8  # the server could not be reached or timed out
TIMEOUT = 9  # `status --watch --timeout` ran out before the workload finished
WORKLOAD_FAILED = 10  # `status --watch`: the workload ended failed, cancelled or expired
INTERRUPTED = 130  # Ctrl-C

TABLE = {
    OK: "success",
    ERROR: "server error or unexpected failure",
    USAGE: "bad command-line usage or spec file",
    AUTH: "not configured, or the token was refused",
    FORBIDDEN: "not allowed (scope or role)",
    NOT_FOUND: "no such object (or not visible to you)",
    INVALID: "request refused: invalid input or state conflict",
    RATE_LIMITED: "rate limit reached",
    NETWORK: "server unreachable or timed out",
    TIMEOUT: "--watch timed out",
    WORKLOAD_FAILED: "the watched workload failed, was cancelled or expired",
}


def for_status(status: int) -> int:
    if status == 401:
        return AUTH
    if status == 403:
        return FORBIDDEN
    if status == 404:
        return NOT_FOUND
    if status == 429:
        return RATE_LIMITED
    if 400 <= status < 500:
        return INVALID
    return ERROR
