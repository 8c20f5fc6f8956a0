"""Production: no default secret, HTTPS only, PostgreSQL required."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings import base
from gpupaas.settings.env import env_bool, env_int, env_str, inherit

inherit(base, globals())

DEBUG = False
SECRET_KEY = env_str("SECRET_KEY")  # required: no default in production
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
    raise ImproperlyConfigured("SECRET_KEY must be at least 50 characters of random text.")
if env_bool("DEBUG", False):
    raise ImproperlyConfigured("DEBUG cannot be turned on with production settings.")
if env_bool("NOTIFY_WEBHOOK_ALLOW_LOOPBACK", False):
    raise ImproperlyConfigured("NOTIFY_WEBHOOK_ALLOW_LOOPBACK cannot be on in production.")
NOTIFY_WEBHOOK_ALLOW_LOOPBACK = False
if base.DATABASES["default"]["ENGINE"] != base.POSTGRESQL_ENGINE:
    raise ImproperlyConfigured("Production needs PostgreSQL: set DATABASE_URL=postgres://…")

# Every web process (and host) shares one rate-limit count per token; Redis is there anyway.
API_RATE_LIMIT_STORE = base.rate_limit_store("redis")

DEV_LOGIN_ENABLED = False
DEV_LOGIN_USERS: list[str] = []

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# The notebook auth endpoint is asked by the ingress controller, possibly over in-cluster HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$", r"^notebooks/auth/$"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
