"""The Django project itself: paths, hosts, the installed apps and middleware, templates,
authentication basics, static files, cookies and the security headers, the cache and logging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import env_bool, env_int, env_list, env_optional_str, env_str

BASE_DIR = Path(__file__).resolve().parents[3]  # the repository
VAR_DIR = Path(env_str("GPUPAAS_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_optional_str("SECRET_KEY") or ""
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
PLATFORM_CONTACT = env_str("PLATFORM_CONTACT", "your platform team")
# The currency GPU classes' hourly costs, budgets and chargeback are in (shown beside every cost).
PLATFORM_CURRENCY = env_str("PLATFORM_CURRENCY", "EUR").strip()
if not 1 <= len(PLATFORM_CURRENCY) <= 8 or not PLATFORM_CURRENCY.isprintable():
    raise ImproperlyConfigured("PLATFORM_CURRENCY must be a short code or symbol, e.g. EUR.")

INSTALLED_APPS = [
    "apps.adminsite.config.GpupaasAdminConfig",  # Django's admin, with a guarded sign-in
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "mozilla_django_oidc",
    "django_prometheus",
    "csp",
    "apps.accounts",
    "apps.audit",
    "apps.catalog",
    "apps.notifications",
    "apps.quotas",
    "apps.policies",
    "apps.budgets",
    "apps.reservations",
    "apps.credentials",
    "apps.datasets",
    "apps.scheduling",
    "apps.workloads",
    "apps.orchestration",
    "apps.serving",
    "apps.telemetry",
    # The edges, above every domain app.
    "apps.web",
    "apps.api",
    "apps.adminsite",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "apps.api.middleware.ApiBodySizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "apps.web.middleware.ClusterDeadlineMiddleware",
    "apps.web.middleware.BrokerCheckMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "gpupaas.urls"
WSGI_APPLICATION = "gpupaas.wsgi.application"
ASGI_APPLICATION = "gpupaas.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.web.context.portal",
            ],
        },
    },
]

AUTH_USER_MODEL = "accounts.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))

LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Database sessions whose store refuses cookies that cannot be one of its keys (a NUL or other
# made-up characters read as signed out, not as a server error): apps/common/sessions.py.
SESSION_ENGINE = "apps.common.sessions"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE", 12 * 3600, minimum=60)
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp) on every response: scripts, styles, fonts and requests
# only from the portal itself; no inline scripts, styles or event handlers anywhere in
# templates/ and static/ (charts start from data attributes, bars are SVG); images also as
# data: URLs (Swagger UI's icons); no plugins, no <base>, forms post only here, and no page
# may frame the portal. Pages that need more say so per view (csp_update).
CONTENT_SECURITY_POLICY: dict[str, Any] = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Per web process, a few seconds: the proxy's recent "yes" per key or person
    # (apps.serving.access) and notebooks' tokens for the gateway (orchestration.cluster_reads).
    "gateway-auth": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "gateway-auth",
        "OPTIONS": {"MAX_ENTRIES": 10_000},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
