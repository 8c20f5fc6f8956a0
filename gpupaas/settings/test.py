"""Tests: PostgreSQL, fast hashing, demo sign-in off unless a test turns it on."""

from __future__ import annotations

from gpupaas.settings import base
from gpupaas.settings.env import env_str, inherit

inherit(base, globals())

SECRET_KEY = "test-only-key"  # noqa: S105
DEBUG = False
DATABASES = {  # tests always use PostgreSQL, with the options production has
    "default": base.database_from_url(
        env_str("DATABASE_URL", "postgres://gpupaas:gpupaas@127.0.0.1:5432/gpupaas"),
        conn_max_age=0,
        pool_size=base.DATABASE_POOL_SIZE,  # 0 (no pool) unless a test's process sets it
    )
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEV_LOGIN_USERS = ["alice", "bob", "carol", "dave", "admin"]
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
CELERY_TASK_ALWAYS_EAGER = False
# No worker runs during tests: queued tasks go nowhere unless a test starts a worker.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "memory://")
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Test receivers (SMTP, webhooks) listen on loopback.
NOTIFY_WEBHOOK_ALLOW_LOOPBACK = True
NOTIFY_RETRY_BASE_SECONDS = 0
# Ask the database on every authorisation call unless a test turns the short cache on.
GATEWAY_AUTH_CACHE_SECONDS = 0
