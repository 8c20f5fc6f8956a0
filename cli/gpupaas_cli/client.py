"""A small HTTP client for the gpupaas API: errors become exceptions with an exit code.

httpx is imported when a client is made, not with this module: its errors are imported by
every command, and ``--help`` or a usage error should not pay for an HTTP stack. It is
imported without its own command-line tool (:mod:`gpupaas_cli.lean`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpupaas_cli import exits, lean
from gpupaas_cli.config import Config

if TYPE_CHECKING:
    import httpx

USER_AGENT = "gpupaas-cli/0.1"
MAX_ATTEMPTS = 3
MAX_RETRY_AFTER_SECONDS = 30.0


@dataclass
class ApiError(Exception):
    """The server answered with an error (its code, message and field errors)."""

    status: int
    code: str
    message: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    retry_after: float | None = None
    # A 409 "would_preempt": the running workloads the request would preempt.
    would_preempt: list[dict[str, Any]] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message

    @property
    def exit_code(self) -> int:
        return exits.for_status(self.status)


class NetworkError(Exception):
    """The server could not be reached or did not answer in time."""

    exit_code = exits.NETWORK


def _error_from(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    retry_after = response.headers.get("Retry-After")
    message = str(body.get("message") or f"HTTP {response.status_code} {response.reason_phrase}")
    if response.status_code == 401:
        message = (
            f"The server refused the token ({message}) Create a token in the portal "
            "and run `gpupaas configure`."
        )
    return ApiError(
        status=response.status_code,
        code=str(body.get("code") or "error"),
        message=message,
        fields={str(k): [str(x) for x in v] for k, v in (body.get("fields") or {}).items()},
        retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
        would_preempt=[v for v in body.get("would_preempt") or [] if isinstance(v, dict)],
    )


class Client:
    def __init__(self, config: Config, *, timeout: float = 30.0, sleep: Any = time.sleep) -> None:
        with lean.hidden("pygments", "rich"):
            import httpx

        self.base = config.url
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=config.url,
            headers={
                "Authorization": f"Bearer {config.token}",
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
            },
            timeout=httpx.Timeout(timeout, connect=10.0),
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _network_error(self, exc: httpx.HTTPError) -> NetworkError:
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return NetworkError(f"gpupaas at {self.base} did not answer in time ({exc}).")
        return NetworkError(
            f"Cannot reach gpupaas at {self.base}: {exc}. Check the URL "
            "(`gpupaas configure`) and your network."
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Send a request; retries rate limits (after Retry-After) and, for requests that are
        safe to repeat, network failures. Returns the decoded JSON body (None for 204)."""
        import httpx

        safe = method == "GET" if idempotent is None else idempotent
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                response = self._http.request(
                    method, path, json=json, params=params, headers=headers
                )
            except httpx.HTTPError as exc:
                if safe and attempt < MAX_ATTEMPTS and not isinstance(exc, httpx.InvalidURL):
                    self._sleep(0.5 * attempt)
                    continue
                raise self._network_error(exc) from exc
            if response.status_code == 429 and attempt < MAX_ATTEMPTS:
                error = _error_from(response)
                wait = min(error.retry_after or 1.0, MAX_RETRY_AFTER_SECONDS)
                self._sleep(wait)
                continue
            if response.status_code >= 500 and safe and attempt < MAX_ATTEMPTS:
                self._sleep(0.5 * attempt)
                continue
            if response.status_code >= 400:
                raise _error_from(response)
            if response.status_code == 204 or not response.content:
                return None
            return response.json()
        raise AssertionError("unreachable")  # the loop returns or raises

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body if body is not None else {})

    def create(self, path: str, body: Any, *, idempotency_key: str | None = None) -> Any:
        """POST that creates something, with an Idempotency-Key so that retries are safe."""
        key = idempotency_key or str(uuid.uuid4())
        return self.request(
            "POST", path, json=body, idempotent=True, headers={"Idempotency-Key": key}
        )

    def stream_lines(self, path: str, **params: Any) -> Iterator[str]:
        """Lines of a streaming text response, as they arrive."""
        import httpx

        query = {k: v for k, v in params.items() if v is not None}
        try:
            with self._http.stream(
                "GET",
                path,
                params=query,
                headers={"Accept": "text/plain, application/json"},
                timeout=httpx.Timeout(None, connect=10.0),
            ) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_from(response)
                yield from response.iter_lines()
        except httpx.HTTPError as exc:
            raise self._network_error(exc) from exc
