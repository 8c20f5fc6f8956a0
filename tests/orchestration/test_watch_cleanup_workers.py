"""The watch's cleanup workers: few at once, and a stopping watch does not wait for a backlog
(what is still waiting is the reconcile pass's to delete)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.test import override_settings

from apps.catalog.models import Cluster
from apps.orchestration.watch import ClusterWatch


def test_two_clean_up_at_once_and_stop_drops_the_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    started: list[int] = []
    finished: list[int] = []
    lock = threading.Lock()

    def clean_one(workload_id: int) -> None:
        with lock:
            started.append(workload_id)
        release.wait(30)
        with lock:
            finished.append(workload_id)

    monkeypatch.setattr(ClusterWatch, "_clean_one", staticmethod(clean_one))
    kube: Any = object()  # never called: the watch is not started
    with override_settings(ORCHESTRATION_WATCH_CLEANUP_CONCURRENCY=2):
        watch = ClusterWatch(Cluster(name="c"), kube=kube)
        watch._clean_up(list(range(1, 101)))  # a burst of 100 endings
        while len(started) < 2:
            threading.Event().wait(0.01)
        assert not watch.wait_cleaned(timeout=0.2)  # two under way, 98 waiting
        assert len(started) == 2
        stopping = threading.Thread(target=watch.stop)
        stopping.start()
        for _ in range(3000):  # until the stop has dropped the 98 waiting
            with watch._cleaning_lock:
                if len(watch._cleaning) == 2:
                    break
            threading.Event().wait(0.01)
        release.set()
        stopping.join(30)
    assert not stopping.is_alive()
    # The two under way finished; the 98 waiting were dropped, not run one by one.
    assert sorted(finished) == sorted(started) and len(started) == 2
