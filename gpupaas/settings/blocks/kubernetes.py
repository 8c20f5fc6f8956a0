"""Kubernetes (orchestration): how the workers converge the clusters, what one replica asks
for besides its GPUs, notebooks opened through the portal, least privilege, log archives and
what a team namespace may hold."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import env_bool, env_int, env_optional_str, env_storage, env_str

# What one replica asks for besides its GPUs (its pod's CPU and memory requests and limits).
WORKLOAD_CPU_MILLI = env_int("WORKLOAD_CPU_MILLI", 2000, minimum=1)
WORKLOAD_MEMORY_MIB = env_int("WORKLOAD_MEMORY_MIB", 8192, minimum=16)

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
# A gang with a replica on a node that has not been Ready for this long (after the
# controller-manager's own node-monitor grace period) restarts whole on Ready nodes; the taint
# manager would evict its pods only minutes later, and those never go while the node is dead.
ORCHESTRATION_NODE_LOSS_GRACE_SECONDS = env_int(
    "ORCHESTRATION_NODE_LOSS_GRACE_SECONDS", 30, minimum=0
)
# Running sweep trials' latest metrics line, read from the end of their pods' logs: the beat
# interval of that pass and the least time between two reads of one trial's log.
ORCHESTRATION_TRIAL_METRICS_SECONDS = env_int("ORCHESTRATION_TRIAL_METRICS_SECONDS", 15, minimum=5)
# Milliseconds a portal page or an API call waits, in all, for the cluster's answers (each HTTP
# request's timeouts and the adapter's retries are cut to what is left) before it says the
# cluster cannot be reached. The workers and the watch keep their own timeouts and retries.
ORCHESTRATION_REQUEST_DEADLINE_MS = env_int("ORCHESTRATION_REQUEST_DEADLINE_MS", 1500, minimum=100)
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
