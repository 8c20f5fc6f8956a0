"""Two requests with the same Idempotency-Key at the same moment create one workload."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from apps.workloads import idempotency as idem
from apps.workloads.models import IdempotencyKey, Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_requests_with_one_key_create_one_workload(cast: Cast) -> None:
    barrier = threading.Barrier(2)
    results: list[tuple[int, bool]] = []
    errors: list[BaseException] = []

    def create() -> Workload:
        workload = workload_submit(
            actor=cast.owner,
            team=cast.team,
            gpu_class=cast.gpu_class,
            image=cast.image,
            request=WorkloadRequest.of(
                kind="training", name="raced", gpu_milli=1000, command=["python"]
            ),
        )
        time.sleep(0.3)  # both are inside their transaction before either commits
        return workload

    def request() -> None:
        try:
            barrier.wait()
            workload, replayed = idem.workload_create_once(
                actor=cast.owner, key="same", fingerprint="f", create=create
            )
            results.append((workload.pk, replayed))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads: list[Any] = [threading.Thread(target=request) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert Workload.objects.count() == 1
    assert IdempotencyKey.objects.count() == 1
    assert {pk for pk, _ in results} == {Workload.objects.get().pk}
    assert sorted(replayed for _, replayed in results) == [False, True]
