"""The one family of cluster errors, and the one answer both doors give for them.

The adapter (:mod:`apps.orchestration.kube`) and the reads (:mod:`apps.orchestration.cluster_reads`)
turn whatever the Kubernetes client raises into one of these; the portal and the API turn
them into the same status and message with :func:`cluster_error_answer`.

- :class:`ClusterUnreachable`: no usable answer (network error, timeout, 5xx or 429 after
  every retry, credentials the API server does not accept, connection settings that cannot
  be used). Trying again later may work.
- :class:`ClusterRefused`: the API server answered and said no (400, 403, 409, 422 …), with
  its own message.
- :class:`ClusterObjectNotFound`: the object is not there (404).

Pure: no Django; importing the Kubernetes client only for the types it translates.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from kubernetes.client.exceptions import ApiException


class ClusterError(RuntimeError):
    """Something a cluster did or did not do; ``code`` names the kind for API clients."""

    code = "cluster_error"


class ClusterUnreachable(ClusterError):
    """The API server did not give a usable answer; trying again later may work."""

    code = "cluster_unreachable"


class ClusterConfigError(ClusterUnreachable):
    """The cluster's connection settings cannot be used (missing file, bad context)."""


class ClusterStarting(ClusterUnreachable):
    """The cluster is still being brought up (its provisioning tool said so, see
    :mod:`apps.orchestration.starting`); ``step`` is what it is doing, in its words."""

    code = "cluster_starting"

    def __init__(self, cluster: str, step: str) -> None:
        super().__init__(f"Cluster {cluster} is starting: {step}")
        self.cluster = cluster
        self.step = step


class ClusterRefused(ClusterError):
    """The API server refused the request; ``message`` is its own words."""

    code = "cluster_refused"

    def __init__(self, message: str, *, status: int = 409, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class ClusterObjectNotFound(ClusterError):
    """The object asked for is not in the cluster."""

    code = "cluster_object_not_found"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# Statuses after which asking again (later) may work: the server is busy or broken.
UNREACHABLE_STATUSES = frozenset({401, 408, 429})


def server_message(exc: ApiException) -> str:
    """The API server's own message from the Status body of an error answer; the HTTP reason
    when the body is not a Status."""
    body: Any = exc.body
    if isinstance(body, bytes | bytearray):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            status = json.loads(body)
        except ValueError:
            status = None
        if isinstance(status, dict) and str(status.get("message") or "").strip():
            return str(status["message"]).strip()
    return str(exc.reason or f"HTTP {exc.status}")


def cluster_error(exc: BaseException, *, what: str = "") -> ClusterError:
    """The family member for an error of the Kubernetes client; anything else (a network
    error, a timeout) is unreachable.

    ``what`` says what was being done (for logs); it is not part of a refusal's message.
    """
    if isinstance(exc, ClusterError):
        return exc
    prefix = f"{what}: " if what else ""
    if isinstance(exc, ApiException):
        status = int(exc.status) if exc.status is not None else 0
        message = server_message(exc)
        if status == 404:
            return ClusterObjectNotFound(message)
        if status >= 500 or status in UNREACHABLE_STATUSES or status == 0:
            return ClusterUnreachable(f"{prefix}{status} {message}")
        return ClusterRefused(message, status=status, reason=str(exc.reason or ""))
    return ClusterUnreachable(f"{prefix}{type(exc).__name__}: {exc}")


class ClusterAnswer(NamedTuple):
    status: int
    message: str


UNREACHABLE_MESSAGE = "The cluster cannot be reached; try again in a moment."
# A cluster that is starting is asked again after this long (its start takes minutes).
STARTING_RETRY_AFTER_SECONDS = 30


def cluster_error_answer(exc: ClusterError) -> ClusterAnswer:
    """The HTTP status and the message for people that the portal and the API both give.

    Unreachable is 503 (try again); a refusal is 422 when the API server found the request
    invalid and 409 otherwise (forbidden, conflict, bad request in this state); not found is
    404. A refusal and a miss carry the API server's own words. A cluster that is starting is
    503 too, saying so and what it is doing, with a Retry-After.
    """
    if isinstance(exc, ClusterRefused):
        status = 422 if exc.status == 422 else 409
        return ClusterAnswer(status, f"The cluster refused: {exc.message}")
    if isinstance(exc, ClusterObjectNotFound):
        return ClusterAnswer(404, f"Not found in the cluster: {exc.message}")
    if isinstance(exc, ClusterStarting):
        return ClusterAnswer(
            503,
            f"The cluster is starting ({exc.step}); try again in a few minutes.",
        )
    return ClusterAnswer(503, UNREACHABLE_MESSAGE)


def cluster_retry_after(exc: ClusterError) -> int:
    """Seconds after which asking again may work (a Retry-After header), 0 when unknown."""
    return STARTING_RETRY_AFTER_SECONDS if isinstance(exc, ClusterStarting) else 0
