"""A dead or refusing broker costs a caller one quick retry, not seconds of kombu's retries.

Queueing never fails the caller (``apps.common.taskqueue``): the failure is logged and the
periodic passes catch up. Without a bound on retries, kombu kept a submit (or a watch step,
which queues a cycle when GPUs free up) retrying the connection for about six seconds.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SEND = """
import django
django.setup()
from apps.common import taskqueue
taskqueue.SCHEDULING_CYCLE.send()
taskqueue.WORKLOAD_RECONCILE.send(7)
print("returned")
"""


def test_a_broker_that_drops_every_connection_gets_one_retry_per_task() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[int] = []

    def drop_everything() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            conn.close()  # a broker that is there and answers nothing

    thread = threading.Thread(target=drop_everything, daemon=True)
    thread.start()
    try:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "gpupaas.settings.test",
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
        }
        out = subprocess.run(
            [sys.executable, "-c", SEND],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        listener.close()
        thread.join(timeout=5)
    assert out.returncode == 0 and "returned" in out.stdout, out.stderr[-2000:]
    assert out.stderr.count("could not queue") == 2, out.stderr[-2000:]
    # Two tasks, each tried at most twice (redis-py may open a second socket per try).
    assert 1 <= len(accepted) <= 4, len(accepted)
