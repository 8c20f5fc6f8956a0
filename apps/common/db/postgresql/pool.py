"""A connection pool that tells its waiting requests at once when PostgreSQL cannot be reached.

psycopg_pool makes new connections in a background worker and lets a request that found none
free wait for one. When the server is down the worker's attempt fails, but the request is not
told: it waits its whole ``timeout`` (DATABASE_POOL_TIMEOUT) and then hears "couldn't get a
connection", the words of a pool whose connections are all in use. Here a failed attempt
hands its error to every request waiting when the pool has given it up, so they fail within
DATABASE_CONNECT_TIMEOUT with the server's own words. A pool that is merely exhausted makes no
attempt (it is at its size), so its requests still wait and still time out as busy.

The worker's own retries (exponential backoff for ``reconnect_timeout``) would make a request
that arrives between two retries wait for the next one; the settings give this pool a
``reconnect_timeout`` of 0, so the worker gives up after one immediate retry and the next
request that needs a connection starts a fresh attempt, as it would without a pool.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool


class FailFastPool(ConnectionPool[Any]):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._connect_failure = threading.local()
        super().__init__(*args, **kwargs)

    def _connect(self, timeout: float | None = None) -> Any:
        try:
            return super()._connect(timeout)
        except psycopg.OperationalError as exc:
            self._connect_failure.error = exc
            raise

    def _add_connection(self, attempt: Any, growing: bool = False) -> None:
        """The pool's own attempt; if it failed, its error goes to every request waiting.

        The waiting requests are told only after the pool has counted the attempt as given up
        (``_nconns`` lowered, ``_growing`` cleared). Told earlier, a request could hear the
        error and come back at once for its next connection while the failed attempt still
        counted as growing the pool: that request started no attempt of its own and waited
        the whole pool timeout, to be told the pool was busy.
        """
        self._connect_failure.error = None
        try:
            super()._add_connection(attempt, growing)
        finally:
            error = self._connect_failure.error
            self._connect_failure.error = None
        if error is not None:
            self._fail_waiting(error)

    def _fail_waiting(self, error: psycopg.OperationalError) -> None:
        """Hands ``error`` to every request waiting for a connection now (each raises it)."""
        with self._lock:
            waiting = list(self._waiting)
            self._waiting.clear()
        for client in waiting:
            client.fail(error)
