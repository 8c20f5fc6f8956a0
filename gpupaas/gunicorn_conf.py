"""gunicorn settings for the portal and API in production (and the API benchmark).

    gunicorn -c python:gpupaas.gunicorn_conf gpupaas.wsgi:application

Anything here can be overridden per deployment with gunicorn's own ``GUNICORN_CMD_ARGS``
(e.g. ``GUNICORN_CMD_ARGS="--workers 8 --bind 0.0.0.0:9000"``).

* Sync workers, one per CPU by default: requests are short and CPU-bound (Python and JSON),
  so more processes than cores only add switching. Put a buffering proxy (the ingress) in
  front, as with any sync-worker deployment, so slow clients never hold a worker.
* The worker heartbeat file lives in /dev/shm: on a disk-backed /tmp every heartbeat is an
  inode change that the filesystem journals, and workers stall behind it.
* Each worker freezes the objects that exist once the application is loaded (Django, DRF,
  models, URL patterns: well over 100,000) out of the garbage collector's reach. Without it
  a full collection walks all of them and pauses the worker for hundreds of milliseconds on a
  small machine; with it, the collector only looks at what requests allocate.
"""

from __future__ import annotations

import gc
import os
from typing import Any

bind = "0.0.0.0:8000"
workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
worker_class = "sync"
backlog = 2048
timeout = 60
graceful_timeout = 30
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108


def post_worker_init(worker: Any) -> None:
    """After the worker has imported the application: freeze what exists now."""
    gc.collect()
    gc.freeze()
