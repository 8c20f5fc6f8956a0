"""Notifications: e-mail through EMAIL_HOST (off without one) and webhooks, and how often and
how many times a notice is tried."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.blocks.core import DEBUG
from gpupaas.settings.env import env_bool, env_int, env_str

# Notices reach users by e-mail, a webhook (Slack/Teams-compatible JSON) and the portal's notice
# list, as each user chooses. E-mail goes out through EMAIL_HOST; without one, the e-mail
# channel is off. Webhooks are https to public addresses only; NOTIFY_WEBHOOK_ALLOW_LOOPBACK
# (development and tests; refused in production) also admits http(s) to this machine.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 20, minimum=1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpupaas <gpupaas@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
EMAIL_BACKEND = (
    "django.core.mail.backends.smtp.EmailBackend"
    if EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend"
)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("Set EMAIL_USE_TLS or EMAIL_USE_SSL, not both.")
NOTIFY_EMAIL_ENABLED = bool(EMAIL_HOST)
NOTIFY_SITE_NAME = env_str("NOTIFY_SITE_NAME", "gpupaas")
NOTIFY_WEBHOOK_ALLOW_LOOPBACK = env_bool("NOTIFY_WEBHOOK_ALLOW_LOOPBACK", DEBUG)
NOTIFY_WEBHOOK_TIMEOUT_SECONDS = env_int("NOTIFY_WEBHOOK_TIMEOUT_SECONDS", 10, minimum=1)
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 6, minimum=1)
NOTIFY_RETRY_BASE_SECONDS = env_int("NOTIFY_RETRY_BASE_SECONDS", 30, minimum=0)
NOTIFY_SWEEP_SECONDS = env_int("NOTIFY_SWEEP_SECONDS", 60, minimum=5)
