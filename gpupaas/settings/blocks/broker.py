"""Redis and Celery: the broker, how tasks are acknowledged and queued, and the workers'
heartbeat."""

from __future__ import annotations

from gpupaas.settings.env import env_bool, env_int, env_str

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
