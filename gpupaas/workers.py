"""The gunicorn worker of production (gpupaas/gunicorn_conf.py): uvicorn's, from the
uvicorn-worker package, which stops cleanly with log streams open.

On a graceful stop (a deploy, a restart) uvicorn waits for every open response to finish,
and a followed log does not finish by itself: without a limit the worker waited for
gunicorn's ``graceful_timeout`` and was killed, its streams broken. Here the responses still
running after ``SHUTDOWN_STREAMS_AFTER`` seconds are cancelled: each stream stops its reader
and frees its place (apps/common/streams.py), and the worker exits well before gunicorn's
limit. Clients follow again (``gpupaas logs -f``, the portal's Follow button).
"""

from __future__ import annotations

from typing import Any

from uvicorn_worker import UvicornWorker as _UvicornWorker

SHUTDOWN_STREAMS_AFTER = 10


class UvicornWorker(_UvicornWorker):
    CONFIG_KWARGS: dict[str, Any] = {
        **_UvicornWorker.CONFIG_KWARGS,
        "timeout_graceful_shutdown": SHUTDOWN_STREAMS_AFTER,
    }
