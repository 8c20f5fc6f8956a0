"""The family of cluster errors on plain data: what the client raises becomes which error,
with the API server's own words, and the one answer both doors give for each."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import api_exception

from apps.orchestration.errors import (
    ClusterConfigError,
    ClusterError,
    ClusterObjectNotFound,
    ClusterRefused,
    ClusterUnreachable,
    cluster_error,
    cluster_error_answer,
)
from apps.orchestration.kube import (
    Backoff,
    ForeignObjectError,
    Kube,
    answer_within,
    bounded_timeout,
    with_backoff,
)

UNREACHABLE = "The cluster cannot be reached; try again in a moment."


def api_error(status: int, message: str | None = None, *, reason: str = "") -> ApiException:
    """An ApiException as the client raises it: the Status body the API server sends."""
    exc = ApiException(status=status, reason=reason or "Reason")
    if message is not None:
        exc.body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": status,
            }
        ).encode()
    return exc


FORBIDDEN = (
    'jobs.batch "wl-7" is forbidden: User "system:serviceaccount:gpupaas:portal" cannot '
    'create resource "jobs" in API group "batch" in the namespace "team-vision"'
)
INVALID = (
    'Job.batch "wl-7" is invalid: spec.template.spec.containers[0].env[0].name: '
    "Invalid value: \"A=B\": a valid environment variable name must not contain '='"
)
EXISTS = 'jobs.batch "wl-7" already exists'
MISSING = 'pods "wl-7-0" not found'
WAITING = 'container "main" in pod "wl-7-0" is waiting to start: ContainerCreating'


@pytest.mark.parametrize(
    ("status", "message", "family", "answer"),
    [
        (403, FORBIDDEN, ClusterRefused, (409, f"The cluster refused: {FORBIDDEN}")),
        (409, EXISTS, ClusterRefused, (409, f"The cluster refused: {EXISTS}")),
        (422, INVALID, ClusterRefused, (422, f"The cluster refused: {INVALID}")),
        (400, WAITING, ClusterRefused, (409, f"The cluster refused: {WAITING}")),
        (404, MISSING, ClusterObjectNotFound, (404, f"Not found in the cluster: {MISSING}")),
        (500, "etcdserver: request timed out", ClusterUnreachable, (503, UNREACHABLE)),
        (503, "the server is shutting down", ClusterUnreachable, (503, UNREACHABLE)),
        (401, "Unauthorized", ClusterUnreachable, (503, UNREACHABLE)),
    ],
)
def test_api_errors_become_the_family_with_the_servers_message(
    status: int, message: str, family: type[ClusterError], answer: tuple[int, str]
) -> None:
    error = cluster_error(api_error(status, message, reason="Whatever"), what="create Job wl-7")
    assert type(error) is family
    assert isinstance(error, ClusterError)
    if isinstance(error, ClusterRefused):
        assert (error.message, error.status, str(error)) == (message, status, message)
    if isinstance(error, ClusterObjectNotFound):
        assert error.message == message
    assert cluster_error_answer(error) == answer


def test_the_dynamic_clients_errors_are_translated_alike() -> None:
    dynamic = api_exception(api_error(422, INVALID, reason="Invalid"))
    assert type(dynamic).__name__ == "UnprocessibleEntityError"
    error = cluster_error(dynamic)
    assert isinstance(error, ClusterRefused)
    assert cluster_error_answer(error) == (422, f"The cluster refused: {INVALID}")


def test_a_body_that_is_not_a_status_gives_the_http_reason() -> None:
    plain = ApiException(status=403, reason="Forbidden")
    plain.body = "<html>proxy says no</html>"
    error = cluster_error(plain)
    assert isinstance(error, ClusterRefused)
    assert error.message == "Forbidden"
    assert cluster_error(ApiException(status=404, reason="Not Found")).args == ("Not Found",)


def test_a_status_body_as_text_is_read_as_well() -> None:
    exc = api_error(409, EXISTS)
    exc.body = exc.body.decode()
    assert cluster_error(exc).args == (EXISTS,)


def test_network_errors_are_unreachable() -> None:
    refused = urllib3.exceptions.MaxRetryError(None, "/api", reason=ConnectionRefusedError(111))  # type: ignore[arg-type]
    for exc in (refused, TimeoutError("timed out"), ConnectionResetError()):
        error = cluster_error(exc, what="list Pod")
        assert type(error) is ClusterUnreachable
        assert str(error).startswith("list Pod: ")
        assert cluster_error_answer(error) == (503, UNREACHABLE)


def test_config_errors_and_foreign_objects_are_members_of_the_family() -> None:
    config = ClusterConfigError("Cluster sim: kubeconfig '/nowhere' cannot be read")
    assert cluster_error_answer(config) == (503, UNREACHABLE)  # no paths shown to users
    foreign = ForeignObjectError("Job team-vision/wl-7 exists and is not managed by gpupaas.")
    assert isinstance(foreign, ClusterRefused)
    assert cluster_error_answer(foreign) == (
        409,
        "The cluster refused: Job team-vision/wl-7 exists and is not managed by gpupaas.",
    )


# --- the adapter's one backoff helper ---------------------------------------------------------

NO_WAIT = Backoff(attempts=3, base_seconds=0.0, max_seconds=0.0)


def calls(*outcomes: BaseException | str) -> tuple[list[int], Any]:
    seen: list[int] = []

    def fn() -> str:
        seen.append(1)
        outcome = outcomes[len(seen) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return seen, fn


def test_a_refusal_is_not_retried_and_keeps_the_servers_words() -> None:
    seen, fn = calls(api_error(422, INVALID))
    with pytest.raises(ClusterRefused) as caught:
        with_backoff(fn, what="create Job wl-7", backoff=NO_WAIT)
    assert (caught.value.status, caught.value.message, len(seen)) == (422, INVALID, 1)
    assert isinstance(caught.value.__cause__, ApiException)


def test_a_miss_is_not_retried() -> None:
    seen, fn = calls(api_error(404, MISSING))
    with pytest.raises(ClusterObjectNotFound, match="wl-7-0"):
        with_backoff(fn, what="get Pod", backoff=NO_WAIT)
    assert len(seen) == 1


def test_busy_and_broken_servers_are_retried_then_unreachable() -> None:
    seen, fn = calls(api_error(503, "busy"), api_error(429, "slow down"), "ok")
    assert with_backoff(fn, what="list Pod", backoff=NO_WAIT) == "ok"
    seen, fn = calls(api_error(500, "boom"), TimeoutError(), api_error(502, "bad gateway"))
    with pytest.raises(ClusterUnreachable, match="list Pod: 502 bad gateway"):
        with_backoff(fn, what="list Pod", backoff=NO_WAIT)
    assert len(seen) == 3


# --- container logs through the adapter ------------------------------------------------------


class FakeLogResponse:
    def __init__(self, chunks: list[bytes | BaseException]) -> None:
        self.chunks = chunks
        self.released = False

    def stream(self, decode_content: bool = True) -> Iterator[bytes]:
        for chunk in self.chunks:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk

    def release_conn(self) -> None:
        self.released = True


class FakeCore:
    def __init__(self, response: FakeLogResponse | BaseException) -> None:
        self.response = response
        self.asked: dict[str, Any] = {}

    def read_namespaced_pod_log(self, name: str, namespace: str, **kw: Any) -> FakeLogResponse:
        self.asked = {"name": name, "namespace": namespace, **kw}
        if isinstance(self.response, BaseException):
            raise self.response
        return self.response


def kube_with(core: FakeCore) -> Kube:
    kube = Kube(None, backoff=NO_WAIT)
    kube.__dict__["core"] = core
    return kube


def test_log_lines_are_whole_whatever_the_chunks() -> None:
    response = FakeLogResponse([b"2025 one\n2025 t", b"wo\r\n2025 caf\xc3", b"\xa9\n2025 last"])
    core = FakeCore(response)
    lines = kube_with(core).pod_log(
        "wl-7-0", "team-vision", container="main", tail_lines=5, follow=True
    )
    assert list(lines) == ["2025 one", "2025 two", "2025 café", "2025 last"]
    assert response.released
    assert core.asked == {
        "name": "wl-7-0",
        "namespace": "team-vision",
        "container": "main",
        "tail_lines": 5,
        "follow": True,
        "timestamps": True,
        "_preload_content": False,
        # The answer is bounded; then the socket's read timeout is lifted (below).
        "_request_timeout": (10, 10),
    }


def test_a_followed_log_may_be_quiet_once_the_server_has_answered() -> None:
    """The server must answer within the timeout (a silent API server is named at once), but
    the lines of a followed log may then be minutes apart: the socket's timeout is lifted."""

    class Sock:
        timeout: float | None = 10.0

        def settimeout(self, value: float | None) -> None:
            self.timeout = value

    response = FakeLogResponse([b"2025 one\n"])
    sock = Sock()
    response.connection = type("Conn", (), {"sock": sock})()  # type: ignore[attr-defined]
    kube_with(FakeCore(response)).pod_log(
        "wl-7-0", "team-vision", container="main", tail_lines=5, follow=True
    )
    assert sock.timeout is None


def test_a_log_stream_that_breaks_ends_unreachable() -> None:
    broken = urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead")
    response = FakeLogResponse([b"2025 one\n", broken])
    lines = kube_with(FakeCore(response)).pod_log(
        "wl-7-0", "team-vision", container="main", tail_lines=5, follow=True
    )
    assert next(lines) == "2025 one"
    with pytest.raises(ClusterUnreachable, match="logs of team-vision/wl-7-0"):
        next(lines)
    assert response.released


def test_a_refused_log_request_keeps_the_servers_words() -> None:
    with pytest.raises(ClusterRefused) as caught:  # the request is made at once
        kube_with(FakeCore(api_error(400, WAITING, reason="BadRequest"))).pod_log(
            "wl-7-0", "team-vision", container="main", tail_lines=5, follow=False
        )
    assert cluster_error_answer(caught.value) == (409, f"The cluster refused: {WAITING}")


def test_inside_a_request_each_http_call_and_retry_is_bounded_by_the_time_left() -> None:
    assert bounded_timeout(None) is None  # a worker: the client's own (none)
    assert bounded_timeout(5.0) == (5.0, 5.0)  # the client ignores a bare float
    with answer_within(1.0):
        connect, read = bounded_timeout(None)
        assert 0.9 < connect <= 1.0 and read == connect
        assert bounded_timeout(60)[0] <= 1.0
        assert bounded_timeout((10, None))[1] is None  # a followed log stays open
    with answer_within(0.0), pytest.raises(TimeoutError):
        bounded_timeout(None)
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]

    start = time.monotonic()
    with answer_within(0.3), pytest.raises(ClusterUnreachable):
        with_backoff(refused, what="list pods")
    assert time.monotonic() - start < 0.5
    assert len(calls) < 5  # no retry that would end after the deadline
