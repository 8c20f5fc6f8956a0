"""Django's PostgreSQL backend with a health check that costs no round trip.

With ``CONN_HEALTH_CHECKS`` Django checks a persistent connection at the start of every
request by running ``SELECT 1``: a full round trip to PostgreSQL, on every request, which on a
busy API is one statement in three or four. A connection the server has closed (a restart, an
administrator's terminate, an idle timeout) tells its client so by making the socket readable:
the server's farewell message, then end-of-file. An idle connection has nothing to read. So
this backend looks at the socket first and runs the ``SELECT 1`` only when there is something
to read, which is exactly when the connection may be gone.

With ``OPTIONS["pool"]`` the pool is this project's ``FailFastPool`` (see its module): a request
waiting for a pooled connection hears at once that the server cannot be reached.
"""

from __future__ import annotations

import select
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base

from apps.common.db.postgresql.pool import FailFastPool


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        try:
            readable, _, _ = select.select([conn.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        if not readable:
            return True
        return bool(super().is_usable())

    @property
    def pool(self) -> FailFastPool | None:
        options = self.settings_dict["OPTIONS"].get("pool")
        if self.alias == NO_DB_ALIAS or not options:
            return None
        pools: dict[str, Any] = self._connection_pools  # type: ignore[attr-defined]
        if self.alias not in pools:
            kwargs = self.get_connection_params()
            kwargs["autocommit"] = True  # Django sets the transaction mode itself later
            checks = self.settings_dict["CONN_HEALTH_CHECKS"]
            made = FailFastPool(
                kwargs=kwargs,
                open=False,  # opened at the first request, not at start-up
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=FailFastPool.check_connection if checks else None,
                **({} if options is True else options),
            )
            # Two threads may build one at once; the first one stored is the one used.
            pools.setdefault(self.alias, made)
        pool: FailFastPool = pools[self.alias]
        return pool
