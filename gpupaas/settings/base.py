"""Settings shared by every environment. Values come only from the environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import (
    env_bool,
    env_int,
    env_list,
    env_optional_str,
    env_rate,
    env_storage,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
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

# --- database --------------------------------------------------------------------------------
# SQLite only as the zero-setup default of the run command; PostgreSQL everywhere else.
DATABASE_URL = env_optional_str("DATABASE_URL")
# PostgreSQL: parameters bound by the server, and statements a connection runs over and over
# (the token lookup, the list's page) prepared after a few runs, so that PostgreSQL parses
# them once per connection (and plans each execution for its values, see below). Turn off
# behind a pooler in transaction mode that cannot keep prepared statements or does not pass
# the ``options`` startup parameter on.
DATABASE_SERVER_SIDE_BINDING = env_bool("DATABASE_SERVER_SIDE_BINDING", True)
POSTGRESQL_ENGINE = "apps.common.db.postgresql"


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

# --- Redis and Celery ------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "gpupaas"
# A task is queued at once or not at all: the caller logs the failure and the periodic passes
# catch up (apps.common.taskqueue). One quick retry and 2 s to connect, instead of kombu's
# default of retrying the connection for seconds while a submit or a watch step waits (6 s
# against a refused port, 15 s a task against a broker that drops every connection).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
    "socket_connect_timeout": 2,
}
HEARTBEAT_INTERVAL_SECONDS = env_int("HEARTBEAT_INTERVAL_SECONDS", 15, minimum=1)

# --- scheduling ------------------------------------------------------------------------------
# The cycle runs after every submit and cancel, and every SCHEDULING_CYCLE_SECONDS from beat.
SCHEDULING_CYCLE_SECONDS = env_int("SCHEDULING_CYCLE_SECONDS", 5, minimum=1)
# Seconds a preempted pod gets to checkpoint: per priority class (apps.workloads.core
# PREEMPTION_GRACE_SECONDS) unless this sets one number for every class. The pod's
# terminationGracePeriodSeconds, the scheduler's wait before requeueing and the message agree.
SCHEDULING_PREEMPTION_GRACE_SECONDS: int | None = (
    env_int("SCHEDULING_PREEMPTION_GRACE_SECONDS", 0, minimum=0)
    if env_optional_str("SCHEDULING_PREEMPTION_GRACE_SECONDS")
    else None
)
# How long a request of each priority class waits for the hub and spoke clusters before it may
# run on a burst cluster (if its team may burst).
SCHEDULING_BURST_WAIT_SECONDS: dict[str, int] = {
    "production": env_int("SCHEDULING_BURST_WAIT_PRODUCTION_SECONDS", 120, minimum=0),
    "training": env_int("SCHEDULING_BURST_WAIT_TRAINING_SECONDS", 900, minimum=0),
    "development": env_int("SCHEDULING_BURST_WAIT_DEVELOPMENT_SECONDS", 300, minimum=0),
    "batch": env_int("SCHEDULING_BURST_WAIT_BATCH_SECONDS", 3600, minimum=0),
}
SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS = env_int(
    "SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS", 6 * 3600, minimum=60
)
SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS", 600, minimum=0
)
SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS", 300, minimum=0
)
SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_BATCH_SECONDS", 120, minimum=0
)

# --- OIDC ------------------------------------------------------------------------------------
# On when a client id and an issuer are given. Endpoints left unset are read from the issuer's
# discovery document (<issuer>/.well-known/openid-configuration) when first needed, never at
# start-up, so a provider outage cannot stop the portal from booting.
OIDC_RP_CLIENT_ID = env_optional_str("OIDC_RP_CLIENT_ID") or ""
OIDC_OP_ISSUER = env_optional_str("OIDC_OP_ISSUER") or ""
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID and OIDC_OP_ISSUER)
OIDC_RP_CLIENT_SECRET = env_optional_str("OIDC_RP_CLIENT_SECRET") or ""
OIDC_OP_AUTHORIZATION_ENDPOINT = env_optional_str("OIDC_OP_AUTHORIZATION_ENDPOINT") or ""
OIDC_OP_TOKEN_ENDPOINT = env_optional_str("OIDC_OP_TOKEN_ENDPOINT") or ""
OIDC_OP_USER_ENDPOINT = env_optional_str("OIDC_OP_USER_ENDPOINT") or ""
OIDC_OP_JWKS_ENDPOINT = env_optional_str("OIDC_OP_JWKS_ENDPOINT") or ""
OIDC_OP_LOGOUT_ENDPOINT = env_optional_str("OIDC_OP_LOGOUT_ENDPOINT") or ""
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "your company account")
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
# How the provider writes groups: "path" (full paths, "/ml/vision"), "name" (short names) or
# "auto" (compared exactly as written). Never matched by suffix; see apps/accounts/core.py.
OIDC_GROUPS_FORMAT = env_str("OIDC_GROUPS_FORMAT", "auto")
if OIDC_GROUPS_FORMAT not in ("auto", "path", "name"):
    raise ImproperlyConfigured(
        f"OIDC_GROUPS_FORMAT={OIDC_GROUPS_FORMAT!r} must be auto, path or name."
    )
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", [])
# Memberships and admin status from the provider are confirmed again (refresh token, then
# userinfo) when older than this, at the next request of a session or use of an API token;
# when the provider refuses, they lapse and the user's portal sessions end.
OIDC_GROUPS_MAX_AGE_SECONDS = env_int("OIDC_GROUPS_MAX_AGE_SECONDS", 3600, minimum=60)
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
OIDC_TOKEN_USE_BASIC_AUTH = env_bool("OIDC_TOKEN_USE_BASIC_AUTH", True)
OIDC_CLOCK_LEEWAY_SECONDS = env_int("OIDC_CLOCK_LEEWAY_SECONDS", 60, minimum=0)
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1)
OIDC_AUTHENTICATION_CALLBACK_URL = "oidc_authentication_callback"
LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/"
if OIDC_ENABLED and not OIDC_RP_CLIENT_SECRET:
    raise ImproperlyConfigured("OIDC is enabled but OIDC_RP_CLIENT_SECRET is unset.")

AUTHENTICATION_BACKENDS = [
    *(["apps.accounts.oidc.GpupaasOIDCBackend"] if OIDC_ENABLED else []),
    "django.contrib.auth.backends.ModelBackend",
]

# Password sign-in to the Django admin. With single sign-on on it is refused and the admin's
# sign-in page sends people to the identity provider, unless ADMIN_PASSWORD_LOGIN=true: a
# break-glass switch for when the provider is down, to be removed once it is back. Where
# password sign-in is allowed, ADMIN_LOGIN_MAX_FAILURES failures for one username or from one
# client address within ADMIN_LOGIN_LOCKOUT_SECONDS lock that username or address out until
# the oldest of them is that old; counted in the rate-limit store.
ADMIN_PASSWORD_LOGIN = env_bool("ADMIN_PASSWORD_LOGIN", False)
ADMIN_LOGIN_MAX_FAILURES = env_int("ADMIN_LOGIN_MAX_FAILURES", 5, minimum=1)
ADMIN_LOGIN_LOCKOUT_SECONDS = env_int("ADMIN_LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

# Local sign-in as seeded demo users: development only, never with DEBUG off (see dev.py).
DEV_LOGIN_ENABLED = False
DEV_LOGIN_USERS: list[str] = []

# --- Kubernetes (orchestration) -------------------------------------------------------------
# Clusters are registered in the admin (catalog → clusters). These tune how the workers
# converge them and what notebooks look like from outside.
ORCHESTRATION_RECONCILE_SECONDS = env_int("ORCHESTRATION_RECONCILE_SECONDS", 15, minimum=1)
# How often team namespaces, quotas, limit ranges, network policies and priority classes
# changed or deleted by hand are restored.
ORCHESTRATION_DRIFT_REPAIR_SECONDS = env_int("ORCHESTRATION_DRIFT_REPAIR_SECONDS", 120, minimum=5)
# Workloads a reconcile pass brings up at once (each creates its objects through the API).
ORCHESTRATION_RECONCILE_CONCURRENCY = env_int("ORCHESTRATION_RECONCILE_CONCURRENCY", 8, minimum=1)
# Ended workloads the watch process cleans up at once (archives their logs, deletes their
# objects). Few: those threads share the process with the watch's state changes, and each one
# busy in Python delays them (every reply from PostgreSQL waits for the interpreter).
ORCHESTRATION_WATCH_CLEANUP_CONCURRENCY = env_int(
    "ORCHESTRATION_WATCH_CLEANUP_CONCURRENCY", 2, minimum=1
)
# With ORCHESTRATION_WATCH on, the `watch_clusters` process follows pods, Jobs and GPU nodes
# through watch streams and the periodic lists become a slow safety net (their defaults grow).
ORCHESTRATION_WATCH = env_bool("ORCHESTRATION_WATCH", False)
ORCHESTRATION_WATCH_SECONDS = env_int("ORCHESTRATION_WATCH_SECONDS", 300, minimum=10)
ORCHESTRATION_STATUS_SYNC_SECONDS = env_int(
    "ORCHESTRATION_STATUS_SYNC_SECONDS", 60 if ORCHESTRATION_WATCH else 3, minimum=1
)
ORCHESTRATION_INVENTORY_SECONDS = env_int(
    "ORCHESTRATION_INVENTORY_SECONDS", 600 if ORCHESTRATION_WATCH else 60, minimum=5
)
NOTEBOOK_HOST = env_str("NOTEBOOK_HOST", "")
# Notebooks are opened only through the portal: their Ingress asks the portal's auth endpoint
# about every request (ingress-nginx auth-url) and sends people without access to the portal's
# sign-in (auth-signin). With a wildcard host ("*.nb.gpu.example.com") each notebook gets a host
# (an origin) of its own; otherwise they share NOTEBOOK_HOST, one path each. PORTAL_URL is the
# portal's public address (the browser is sent there); NOTEBOOK_AUTH_URL is where the ingress
# controller reaches the auth endpoint (by default through PORTAL_URL; its host must be in
# ALLOWED_HOSTS). The "Open" redirect carries a one-time ticket valid NOTEBOOK_TICKET_SECONDS;
# the notebook's host then holds a signed cookie valid NOTEBOOK_ACCESS_SECONDS (renewed while
# in use). NOTEBOOK_TLS_SECRET: the certificate Secret for the notebooks' Ingress TLS.
NOTEBOOK_WILDCARD_HOST = env_str("NOTEBOOK_WILDCARD_HOST", "")
NOTEBOOK_TLS_SECRET = env_str("NOTEBOOK_TLS_SECRET", "")
PORTAL_URL = env_str("PORTAL_URL", "").rstrip("/")
NOTEBOOK_AUTH_URL = env_str(
    "NOTEBOOK_AUTH_URL", f"{PORTAL_URL}/notebooks/auth/" if PORTAL_URL else ""
)
NOTEBOOK_TICKET_SECONDS = env_int("NOTEBOOK_TICKET_SECONDS", 60, minimum=5)
NOTEBOOK_ACCESS_SECONDS = env_int("NOTEBOOK_ACCESS_SECONDS", 3600, minimum=60)
if NOTEBOOK_WILDCARD_HOST and not NOTEBOOK_WILDCARD_HOST.split("://")[-1].startswith("*."):
    raise ImproperlyConfigured(
        f"NOTEBOOK_WILDCARD_HOST={NOTEBOOK_WILDCARD_HOST!r} must start with '*.'."
    )
if (NOTEBOOK_HOST or NOTEBOOK_WILDCARD_HOST) and not (PORTAL_URL and NOTEBOOK_AUTH_URL):
    raise ImproperlyConfigured(
        "Notebooks served through an ingress are opened through the portal: set PORTAL_URL "
        "(and NOTEBOOK_AUTH_URL if the ingress controller reaches the portal elsewhere)."
    )
NOTEBOOK_INGRESS_NAMESPACE = env_str("NOTEBOOK_INGRESS_NAMESPACE", "ingress-nginx")
# Least privilege on the cluster (the Helm chart sets both): the portal's ServiceAccount as
# ``namespace/name`` and the ClusterRole it is granted in each team namespace through a
# RoleBinding it creates with the namespace. Empty: no RoleBinding (a kubeconfig that may
# already do everything).
K8S_PORTAL_SERVICE_ACCOUNT = env_optional_str("K8S_PORTAL_SERVICE_ACCOUNT") or ""
K8S_PORTAL_TEAM_ROLE = env_optional_str("K8S_PORTAL_TEAM_ROLE") or ""
if bool(K8S_PORTAL_SERVICE_ACCOUNT) != bool(K8S_PORTAL_TEAM_ROLE) or (
    K8S_PORTAL_SERVICE_ACCOUNT and K8S_PORTAL_SERVICE_ACCOUNT.count("/") != 1
):
    raise ImproperlyConfigured(
        "Set K8S_PORTAL_SERVICE_ACCOUNT (as namespace/name) and K8S_PORTAL_TEAM_ROLE together."
    )

# Inference endpoints: served on ENDPOINT_HOST under /endpoints/<namespace>/<id>/, every call
# authorised by the portal (ENDPOINT_AUTH_URL: where the ingress controller asks it; a team
# member's session or one of the endpoint's keys). A rolling update whose new replicas are not
# ready within ENDPOINT_PROGRESS_DEADLINE_SECONDS is rolled back. The scaling loop runs every
# SERVING_AUTOSCALE_SECONDS and changes an endpoint's replicas at most once per
# SERVING_SCALE_COOLDOWN_SECONDS (scale-downs; scale-ups wait a third of it).
ENDPOINT_HOST = env_str("ENDPOINT_HOST", "")
ENDPOINT_AUTH_URL = env_str(
    "ENDPOINT_AUTH_URL", f"{PORTAL_URL}/endpoints/auth/" if PORTAL_URL else ""
)
ENDPOINT_PROGRESS_DEADLINE_SECONDS = env_int("ENDPOINT_PROGRESS_DEADLINE_SECONDS", 600, minimum=5)
SERVING_AUTOSCALE_SECONDS = env_int("SERVING_AUTOSCALE_SECONDS", 30, minimum=5)
SERVING_SCALE_COOLDOWN_SECONDS = env_int("SERVING_SCALE_COOLDOWN_SECONDS", 300, minimum=0)
SERVING_SAMPLE_RETENTION_DAYS = env_int("SERVING_SAMPLE_RETENTION_DAYS", 30, minimum=1)
# What the scaling loop asks Prometheus per endpoint ($namespace, $service = wl-<id>): by
# default ingress-nginx's request metrics and dcgm-exporter's utilisation per pod.
SERVING_RPS_QUERY = env_str(
    "SERVING_RPS_QUERY",
    'sum(rate(nginx_ingress_controller_requests{exported_namespace="$namespace",'
    'exported_service="$service"}[2m]))',
)
SERVING_LATENCY_QUERY = env_str(
    "SERVING_LATENCY_QUERY",
    "histogram_quantile(0.95, sum by (le) (rate(nginx_ingress_controller_request_duration_"
    'seconds_bucket{exported_namespace="$namespace",exported_service="$service"}[5m])))',
)
# A scrape without honor_labels renames the exporter's pod labels to exported_*: either counts.
SERVING_GPU_QUERY = env_str(
    "SERVING_GPU_QUERY",
    'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="$namespace",exported_pod=~"$service-.*"} or '
    'DCGM_FI_DEV_GPU_UTIL{namespace="$namespace",pod=~"$service-.*",exported_pod=""})',
)
if ENDPOINT_HOST and not ENDPOINT_AUTH_URL:
    raise ImproperlyConfigured(
        "Endpoints served through an ingress are authorised by the portal: set PORTAL_URL "
        "(or ENDPOINT_AUTH_URL)."
    )
NOTEBOOK_HOME_SIZE = env_str("NOTEBOOK_HOME_SIZE", "20Gi")
# Logs and events outlive the objects: before a workload's objects are deleted, the end of
# each pod's log (at most this many bytes per replica and attempt) and its Kubernetes events
# are archived, and kept this many days. When the cluster cannot give the logs, the delete
# waits for them this long at most, then goes ahead and the archive says why they are missing.
LOG_ARCHIVE_MAX_BYTES_PER_REPLICA = env_int(
    "LOG_ARCHIVE_MAX_BYTES_PER_REPLICA", 1024 * 1024, minimum=1024
)
LOG_ARCHIVE_RETENTION_DAYS = env_int("LOG_ARCHIVE_RETENTION_DAYS", 30, minimum=1)
LOG_ARCHIVE_RETRY_SECONDS = env_int("LOG_ARCHIVE_RETRY_SECONDS", 300, minimum=0)

# Objects a team namespace may hold (one ResourceQuota's count/* keys): whatever its GPU
# quota, a team cannot fill the cluster's database. A sweep of 256 points is 256 Jobs.
# Environment variables no request may set (comma-separated names, or prefixes ending in *):
# the GPU runtime's and the loader's, which would undo MIG or vGPU isolation. GPUPAAS_* is
# always reserved.
_env_reserved = env_optional_str("ENV_RESERVED")
# None: the rule set's default (apps.workloads.rules.DEFAULT_RESERVED_ENV_PATTERNS).
ENV_RESERVED: list[str] | None = (
    None if _env_reserved is None else [p.strip() for p in _env_reserved.split(",") if p.strip()]
)
TEAM_MAX_JOBS = env_int("TEAM_MAX_JOBS", 1000, minimum=1)
TEAM_MAX_PODS = env_int("TEAM_MAX_PODS", 1000, minimum=1)
TEAM_MAX_SECRETS = env_int("TEAM_MAX_SECRETS", 200, minimum=1)
TEAM_MAX_CONFIGMAPS = env_int("TEAM_MAX_CONFIGMAPS", 50, minimum=1)
TEAM_MAX_SERVICES = env_int("TEAM_MAX_SERVICES", 200, minimum=1)
TEAM_MAX_VOLUME_CLAIMS = env_int("TEAM_MAX_VOLUME_CLAIMS", 100, minimum=1)
# Each team's shared ReadWriteMany volume (mounted at /team in notebooks and jobs), and the
# storage all its volume claims may request together (ResourceQuota requests.storage: the
# team volume, the home volumes, the dataset claims). An empty class: the cluster's default.
TEAM_VOLUME_SIZE = env_storage("TEAM_VOLUME_SIZE", "100Gi")
TEAM_VOLUME_STORAGE_CLASS = env_str("TEAM_VOLUME_STORAGE_CLASS", "")
TEAM_STORAGE_QUOTA = env_storage("TEAM_STORAGE_QUOTA", "1Ti")

# --- Telemetry (DCGM metrics from Prometheus, accounting, idle policy) -------------------------
# On when PROMETHEUS_URL is given (or TELEMETRY_ENABLED=true). Idle durations are defaults for
# GPU classes and teams without their own idle policy (admin → telemetry → idle policies).
PROMETHEUS_URL = env_optional_str("PROMETHEUS_URL") or ""
TELEMETRY_ENABLED = env_bool("TELEMETRY_ENABLED", bool(PROMETHEUS_URL))
TELEMETRY_INGEST_SECONDS = env_int("TELEMETRY_INGEST_SECONDS", 60, minimum=1)
# Beat interval of the month-to-date spend and run rate of teams with a budget.
BUDGET_SPEND_SECONDS = env_int("BUDGET_SPEND_SECONDS", 300, minimum=10)
TELEMETRY_NODE_HEALTH_SECONDS = env_int("TELEMETRY_NODE_HEALTH_SECONDS", 300, minimum=10)
TELEMETRY_QUERY_TIMEOUT_SECONDS = env_int("TELEMETRY_QUERY_TIMEOUT_SECONDS", 10, minimum=1)
TELEMETRY_IDLE_THRESHOLD_PERCENT = env_int("TELEMETRY_IDLE_THRESHOLD_PERCENT", 5, minimum=0)
TELEMETRY_IDLE_WARN_SECONDS = env_int("TELEMETRY_IDLE_WARN_SECONDS", 20 * 60, minimum=1)
TELEMETRY_IDLE_SUSPEND_SECONDS = env_int("TELEMETRY_IDLE_SUSPEND_SECONDS", 30 * 60, minimum=1)
TELEMETRY_IDLE_FLAG_SECONDS = env_int("TELEMETRY_IDLE_FLAG_SECONDS", 60 * 60, minimum=1)

# --- REST API --------------------------------------------------------------------------------
# Rates are "<count>/<s|sec|m|min|h|hour|d|day>"; over one, the answer is 429 with Retry-After.
# Per user: every token and session of one person share this budget.
API_RATE_LIMIT = env_rate("API_RATE_LIMIT", "600/min")
# Per client address (see TRUSTED_PROXY_COUNT), whoever is signed in; also the budget of
# callers without credentials.
API_RATE_LIMIT_PER_ADDRESS = env_rate("API_RATE_LIMIT_PER_ADDRESS", "1200/min")
# Failed API authentications (unknown, revoked, expired or malformed tokens) per client
# address; over it, every token from that address gets 429 until the window passes.
API_AUTH_FAILURE_LIMIT = env_rate("API_AUTH_FAILURE_LIMIT", "20/min")
# When the rate-limit store cannot be reached: refuse API writes and admin password sign-ins
# with 503 (API reads still pass). false lets everything through, uncounted, until it is back.
API_RATE_LIMIT_FAIL_CLOSED_WRITES = env_bool("API_RATE_LIMIT_FAIL_CLOSED_WRITES", True)


def rate_limit_store(default: str) -> str:
    """Where the rate-limit counters live: "local" (per process: development and tests) or
    "redis" (shared by every web process, at REDIS_URL; production's default)."""
    store = env_str("API_RATE_LIMIT_STORE", default)
    if store not in ("local", "redis"):
        raise ImproperlyConfigured(f"API_RATE_LIMIT_STORE={store!r} must be local or redis.")
    return store


API_RATE_LIMIT_STORE = rate_limit_store("local")
# Request bodies above this size are refused with 413 before they are read.
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
API_PAGE_SIZE = env_int("API_PAGE_SIZE", 50, minimum=1)
API_MAX_PAGE_SIZE = env_int("API_MAX_PAGE_SIZE", 200, minimum=1)
# How long a retried POST with the same Idempotency-Key returns the first result.
API_IDEMPOTENCY_TTL_SECONDS = env_int("API_IDEMPOTENCY_TTL_SECONDS", 24 * 3600, minimum=60)
# Personal API tokens: the longest lifetime a new token may have, in days (0: no limit, and
# "never expires" may be chosen). A token asked for without an expiry gets the longest
# allowed; one that is older than this stops working even if it was created without one.
API_TOKEN_MAX_LIFETIME_DAYS = env_int("API_TOKEN_MAX_LIFETIME_DAYS", 365, minimum=0)
# Live (neither revoked nor expired) tokens one person may hold.
API_TOKEN_MAX_PER_USER = env_int("API_TOKEN_MAX_PER_USER", 20, minimum=1)

# Log streams (API follow, the portal's live view; apps/common/streams.py): how many one
# person may hold open at once in a web process (one more is answered 429), the longest one
# stays open (it then ends with a message saying so), and the seconds without a line after
# which the portal's live view sends a keep-alive comment.
STREAMS_PER_USER = env_int("STREAMS_PER_USER", 4, minimum=1)
STREAM_MAX_SECONDS = env_int("STREAM_MAX_SECONDS", 3600, minimum=1)
STREAM_HEARTBEAT_SECONDS = env_int("STREAM_HEARTBEAT_SECONDS", 15, minimum=1)

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "apps.api.authentication.TokenScopePermission",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.base.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": API_RATE_LIMIT},
    "DEFAULT_RENDERER_CLASSES": ["apps.api.renderers.FastJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["apps.api.renderers.FastJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.api.base.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gpupaas API",
    "DESCRIPTION": (
        "Self-service GPUs: submit notebooks, training jobs and sweeps, follow them, and see "
        "your teams' quotas. Authenticate with a personal token "
        "(`Authorization: Bearer gpp_…`, created in the portal under API tokens); a token "
        "with the read scope may only read. Every error has the same shape: "
        '`{"code", "message", "fields"}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the installed package, so the docs work without internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStateEnum": "apps.workloads.models.Workload.State",
        "WorkloadKindEnum": "apps.workloads.models.Workload.Kind",
        "PriorityClassEnum": "apps.workloads.models.Workload.Priority",
        "QuotaRequestStateEnum": "apps.quotas.models.QuotaRequest.State",
        "QuotaRequestKindEnum": "apps.quotas.models.QuotaRequest.Kind",
        "ReservationStateEnum": "apps.reservations.models.Reservation.State",
        "NoticeEventEnum": "apps.api.views.notifications.EVENTS",
    },
}

# --- notifications and e-mail ---------------------------------------------------------------
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

# --- metrics ---------------------------------------------------------------------------------
PROMETHEUS_EXPORT_MIGRATIONS = False
# /metrics answers only `Authorization: Bearer <METRICS_TOKEN>`; with no token, only callers on
# this host (loopback). Everyone else gets 404.
METRICS_TOKEN = env_optional_str("METRICS_TOKEN") or ""

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# --- governance: quota grants and reservations -----------------------------------------------
# The longest period a quota request may ask for, in days.
QUOTA_GRANT_MAX_DAYS = env_int("QUOTA_GRANT_MAX_DAYS", 90, minimum=1)
# The longest reservation window, in days.
RESERVATION_MAX_DAYS = env_int("RESERVATION_MAX_DAYS", 14, minimum=1)
# Bookings of more than this many GPUs wait for a platform admin's approval (0: every booking).
RESERVATION_APPROVAL_THRESHOLD_GPUS = env_int("RESERVATION_APPROVAL_THRESHOLD_GPUS", 8, minimum=0)
# How often grants and reservations that started or ended are acted on (cluster quota refreshed,
# audited, people told), in seconds. The scheduler itself reads them at every cycle.
GOVERNANCE_BOUNDARY_SECONDS = env_int("GOVERNANCE_BOUNDARY_SECONDS", 30, minimum=5)
