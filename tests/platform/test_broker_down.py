"""A dead or refusing broker costs a caller one quick retry, not seconds of kombu's retries.

Queueing never fails the caller (``apps.common.taskqueue``): the failure is logged and the
periodic passes catch up. Without a bound on retries, kombu kept a submit (or a watch step,
which queues a cycle when GPUs free up) retrying the connection for about six seconds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.conf import settings

from apps.accounts.services import api_token_create
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast
from tests.plugins.redis_server import redis_start

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


# --- a write that queues work, with Redis down ---------------------------------------------

WRITES = """
import json, sys, time
import django
django.setup()
from django.test import Client
from apps.accounts.models import User
args = json.loads(sys.argv[1])
api = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {args['token']}")
portal = Client(raise_request_exception=False)
portal.force_login(User.objects.get(username="owner"))
api.get("/api/v1/")  # the first request imports the URL configuration: not timed
out = {}
for name, client, path, data in [
    ("api submit", api, "/api/v1/workloads/", args["job"]),
    ("api cancel", api, f"/api/v1/workloads/{args['cancel']}/cancel/", {}),
    ("portal submit", portal, "/workloads/new/notebook/", args["notebook"]),
    ("portal cancel", portal, f"/workloads/{args['cancel']}/cancel/", {}),
]:
    start = time.monotonic()
    if client is api:
        response = client.post(path, json.dumps(data), content_type="application/json")
    else:
        response = client.post(path, data)
    out[name] = {
        "status": response.status_code,
        "body": response.content.decode()[:2000],
        "seconds": time.monotonic() - start,
        "retry_after": response.get("Retry-After"),
    }
from apps.workloads.models import Workload
from apps.workloads.services import workload_cancel
target = Workload.objects.get(pk=args["cancel"])
out["state after the requests"] = target.state
# A background writer (no request) records its change and leaves the task to the passes.
workload_cancel(actor=User.objects.get(username="owner"), workload=target, source_ip=None)
print(json.dumps(out))
"""


@pytest.mark.django_db(transaction=True)
def test_a_submit_or_a_cancel_with_redis_down_is_refused_within_2_s_and_nothing_is_done(
    cast: Cast, tmp_path: Path
) -> None:
    """Before, the write was done and its task silently dropped (a log line): the person was told
    "submitted" while no worker heard of it until a periodic pass. Now the broker is asked inside
    the write's transaction; with Redis stopped the write is rolled back and both doors say so.
    A writer outside a request (the watch, a worker) still records its change."""
    target = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        name="to-cancel",
        state=core.PENDING,
    )
    _, token = api_token_create(
        actor=cast.owner, name="broker down", scopes=["write"], expires_at=None
    )
    proc, url = redis_start(tmp_path)
    proc.terminate()  # a real Redis that was there and is gone: its port now refuses
    proc.wait(timeout=10)
    before = Workload.objects.count()
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.test",
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
        ),
        "CELERY_BROKER_URL": url,
    }
    args = {
        "token": token,
        "cancel": target.pk,
        "job": {
            "kind": "training",
            "name": "resnet",
            "gpu_class": cast.gpu_class.name,
            "image": cast.image.name,
            "gpu_milli": 1000,
            "command": ["python", "train.py"],
        },
        "notebook": {
            "action": "submit",
            "name": "my-notebook",
            "team": str(cast.team.pk),
            "gpu_class": str(cast.gpu_class.pk),
            "gpu_milli": "1000",
            "priority_class": "development",
            "image": str(cast.image.pk),
            "max_runtime_hours": "8",
            "idle_timeout_minutes": "30",
        },
    }
    done = subprocess.run(
        [sys.executable, "-c", WRITES, json.dumps(args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("api submit", "api cancel"):
        answer = result[name]
        assert answer["status"] == 503, (name, answer)
        body = json.loads(answer["body"])
        assert body["code"] == "broker_unreachable", (name, body)
        assert "work queue" in body["message"] and "nothing was done" in body["message"]
    for name in ("portal submit", "portal cancel"):
        answer = result[name]
        assert answer["status"] == 503, (name, answer)
        assert "work queue" in answer["body"] and "nothing was done" in answer["body"]
    assert result.pop("state after the requests") == core.PENDING  # nor the cancel
    for name, answer in result.items():
        assert answer["retry_after"], (name, answer)
        assert answer["seconds"] < 2.0, (name, answer)
    assert Workload.objects.count() == before  # neither submission was recorded
    target.refresh_from_db()
    assert target.state == core.CANCELLED  # the background writer's cancel was
    assert "could not queue" in done.stderr
