"""gunicorn settings for the portal and API in production (and the API benchmark).

    gunicorn -c python:gpupaas.gunicorn_conf gpupaas.asgi:application

Anything here can be overridden per deployment with gunicorn's own ``GUNICORN_CMD_ARGS``
(e.g. ``GUNICORN_CMD_ARGS="--workers 8 --bind 0.0.0.0:9000"``).

* ASGI workers (uvicorn's, from the uvicorn-worker package), one per CPU by default:
  requests are short and CPU-bound (Python and JSON), so more processes than cores only add
  switching. Django runs each request's synchronous code (middleware, views) on a thread of
  its own, taking a database connection from the worker's pool; long-lived responses (log
  follow, the portal's live log view) are served on the worker's event loop, their blocking
  reads on threads of their own
  (apps/common/streams.py): open streams hold no worker, and /healthz and the API answer
  beside any number of them (bench/streams_bench.py). With sync workers each stream held a
  whole worker: a few followers starved the portal, and ``timeout`` cut every stream.
  ``timeout`` still restarts a worker whose event loop stops answering; a stream's length is
  bounded by STREAM_MAX_SECONDS instead, and on a graceful stop open streams are ended after
  10 s (gpupaas/workers.py), within ``graceful_timeout``. Put a buffering proxy (the
  ingress) in front, so slow clients never hold a worker, and let it pass streams unbuffered
  (``X-Accel-Buffering: no``) with a read timeout above STREAM_MAX_SECONDS.
* The worker heartbeat file lives in /dev/shm: on a disk-backed /tmp every heartbeat is an
  inode change that the filesystem journals, and workers stall behind it.
* The garbage collector is tuned for request work. Each worker freezes the objects that
  exist once the application is loaded (Django, DRF, models, URL patterns: well over
  100,000) out of the collector's reach: without that, a full collection walks all of them
  and pauses the worker for hundreds of milliseconds on a small machine. And the youngest
  generation is collected after 10,000 allocations instead of 700: a request leaves a few
  hundred objects in reference cycles (DRF's request, view and response point at each
  other), and at 700 the collector ran mid-request, promoted the live request's objects and
  ended in full collections of ~25 ms every second or two; at 10,000 each young collection
  finds whole requests already finished and frees them there. Measured on the API list at
  200 requests/s on two cores: p99 from ~70-110 ms to ~20-40 ms, and 390 → 447 requests/s
  at saturation (bench/README.md).
"""

from __future__ import annotations

import gc
import os
from typing import Any

# Under ASGI each request's synchronous code runs on a thread of its own (Django gives every
# request its own thread-sensitive context), and Django's connections belong to a thread: a
# persistent connection was opened for each request and never reused. Kept open
# (DATABASE_CONN_MAX_AGE above 0) they piled up (2 workers went from 7 to over 90 under
# bench/api_mix_bench.py) until PostgreSQL refused new ones; closed at each request's end, every
# request paid a new PostgreSQL session (a backend process and a SCRAM exchange): on two cores
# the API list fell from ~440 to ~60 requests/s and a submit took half a second. So the web
# server keeps a pool of connections per worker process (DATABASE_POOL_SIZE, psycopg_pool through
# Django): a request borrows one and gives it back at its end. Unless the deployment says
# otherwise (behind a pooler such as PgBouncer, say, with DATABASE_POOL_SIZE=0); without a
# pool, connections are closed at each request's end. Celery workers keep their persistent
# connections (one thread each).
os.environ.setdefault("DATABASE_POOL_SIZE", "8")
os.environ.setdefault("DATABASE_CONN_MAX_AGE", "0")

bind = "0.0.0.0:8000"
workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
worker_class = "gpupaas.workers.UvicornWorker"
backlog = 2048
timeout = 60
graceful_timeout = 30
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None  # noqa: S108


GC_YOUNG_THRESHOLD = 10_000


def post_worker_init(worker: Any) -> None:
    """After the worker has imported the application: freeze what exists now, and collect
    the young generation less often (see above)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)
