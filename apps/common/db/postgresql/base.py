"""Django's PostgreSQL backend with a health check that costs no round trip.

With ``CONN_HEALTH_CHECKS`` Django checks a persistent connection at the start of every
request by running ``SELECT 1``: a full round trip to PostgreSQL, on every request, which on a
busy API is one statement in three or four. A connection the server has closed (a restart, an
administrator's terminate, an idle timeout) tells its client so by making the socket readable:
the server's farewell message, then end-of-file. An idle connection has nothing to read. So
this backend looks at the socket first and runs the ``SELECT 1`` only when there is something
to read, which is exactly when the connection may be gone.
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base


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
