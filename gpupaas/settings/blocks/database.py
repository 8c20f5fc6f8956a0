"""The database: PostgreSQL from DATABASE_URL with this project's options (server-side
binding, a connection pool per process), SQLite as the run command's zero-setup default."""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.blocks.core import VAR_DIR
from gpupaas.settings.env import env_bool, env_int, env_optional_str

# SQLite only as the zero-setup default of the run command; PostgreSQL everywhere else.
DATABASE_URL = env_optional_str("DATABASE_URL")
# PostgreSQL: parameters bound by the server, and statements a connection runs over and over
# (the token lookup, the list's page) prepared after a few runs, so that PostgreSQL parses
# them once per connection (and plans each execution for its values, see below). Turn off
# behind a pooler in transaction mode that cannot keep prepared statements or does not pass
# the ``options`` startup parameter on.
DATABASE_SERVER_SIDE_BINDING = env_bool("DATABASE_SERVER_SIDE_BINDING", True)
POSTGRESQL_ENGINE = "apps.common.db.postgresql"
# Seconds to wait for PostgreSQL to accept a connection (libpq's connect_timeout; 2 is its
# smallest useful value).
DATABASE_CONNECT_TIMEOUT = env_int("DATABASE_CONNECT_TIMEOUT", 2, minimum=2)


def database_from_url(url: str, *, conn_max_age: int, pool_size: int = 0) -> dict[str, Any]:
    """Django's database settings for a database URL, with this project's PostgreSQL options."""
    try:
        database: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=conn_max_age))
    except (ValueError, KeyError) as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from exc
    if database["ENGINE"] == "django.db.backends.postgresql":
        # Django's backend, with a health check that needs no round trip (apps/common/db).
        database["ENGINE"] = POSTGRESQL_ENGINE
        database["CONN_HEALTH_CHECKS"] = True
        # A server that is down or unreachable fails the request in seconds, not after the
        # operating system's TCP timeout (minutes for a host that drops packets).
        database.setdefault("OPTIONS", {})["connect_timeout"] = DATABASE_CONNECT_TIMEOUT
        if DATABASE_SERVER_SIDE_BINDING:
            # Prepared, but planned for the values of each execution: after five runs
            # PostgreSQL may switch a prepared statement to a generic plan made for average
            # values, and workloads are anything but evenly spread (one person may own
            # thousands, one team a third of the table). The dashboard's "my workloads" took
            # 76 ms with the generic plan (it expected a row, looped 3,000 times over the
            # teams and users) and 0.4 ms planned for the person at hand.
            database.setdefault("OPTIONS", {}).update(
                server_side_binding=True,
                prepare_threshold=5,
                options="-c plan_cache_mode=force_custom_plan",
            )
        if pool_size:
            # A pool per process (psycopg_pool, through Django's own support): a request
            # borrows a connection and gives it back at its end, whatever thread it ran on.
            # Django closes (returns) pooled connections at each request's end, so the pool
            # replaces persistent connections: CONN_MAX_AGE must be 0.
            database["CONN_MAX_AGE"] = 0
            database.setdefault("OPTIONS", {})["pool"] = {
                "min_size": 0,  # an idle worker holds none (closed after 10 idle minutes)
                "max_size": pool_size,
                "timeout": DATABASE_POOL_TIMEOUT,
                # A failed connection attempt is not retried in the background: the next
                # request that needs one tries again, and a request waiting while the server
                # is down hears so at once (apps/common/db/postgresql/pool.py), not after
                # DATABASE_POOL_TIMEOUT in the words of a busy pool.
                "reconnect_timeout": 0,
            }
    return database


# Connections each process keeps in a pool (0: none, Django's persistent connections per
# thread instead). The web server under ASGI sets it (gpupaas/gunicorn_conf.py): there each
# request's synchronous code runs on a thread of its own, so a per-thread connection is opened
# for every request and never reused.
DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 0, minimum=0)
# Seconds a request waits for a free pooled connection before it fails instead of hanging.
DATABASE_POOL_TIMEOUT = env_int("DATABASE_POOL_TIMEOUT", 10, minimum=1)

if DATABASE_URL:
    DATABASES = {
        "default": database_from_url(
            DATABASE_URL,
            conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
            pool_size=DATABASE_POOL_SIZE,
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "db.sqlite3"),
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
