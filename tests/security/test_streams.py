"""Log streams never starve the portal (the attack: three ``logs?follow=true`` requests held
both sync workers; /healthz took 56 s and every follow was cut after 60 s).

Served as production serves them, under ASGI (Django's AsyncClient: one event loop, the
synchronous views on one thread, as in a uvicorn worker): open streams hold neither the loop
nor that thread, each user holds at most STREAMS_PER_USER, the portal's live view sends
keep-alives, every stream ends at STREAM_MAX_SECONDS, and permissions are unchanged. The
figures on a real server are in bench/streams_bench.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.core.signals import request_finished
from django.db import close_old_connections
from django.test import AsyncClient
from django.test.utils import override_settings

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.common import streams
from apps.orchestration.cluster_reads import LogsUnavailable
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


class FakeFollow:
    """A followed container: a first line at once, then silence until released (as a quiet
    training job), the way the Kubernetes client blocks in a followed read."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.opened = 0
        self.closed = 0

    def __call__(self, **kwargs: Any) -> Iterator[str]:
        self.opened += 1
        try:
            yield "2025-01-01T00:00:00Z epoch 1"
            self.release.wait(30)
        finally:
            self.closed += 1


@pytest.fixture
def follow(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeFollow]:
    fake = FakeFollow()
    monkeypatch.setattr("apps.api.views.workloads.logs.workload_logs", fake)
    monkeypatch.setattr("apps.web.views.workloads.logs.workload_logs", fake)
    yield fake
    fake.release.set()


@pytest.fixture
def workload(cast: Cast) -> Workload:
    created: Workload = WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
    )
    return created


def token(user: User) -> dict[str, str]:
    _, plaintext = api_token_create(actor=user, name="t", scopes=["read"], expires_at=None)
    return {"Authorization": f"Bearer {plaintext}"}


def run(coro: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(coro)()


def chunks(response: Any) -> Any:
    """The body of a streamed response (each read of streaming_content wraps it anew)."""
    if not hasattr(response, "body_chunks"):
        response.body_chunks = aiter(response.streaming_content)
    return response.body_chunks


async def first_chunk(response: Any) -> bytes:
    chunk: bytes = await asyncio.wait_for(anext(chunks(response)), 5)
    return chunk


async def read_all(response: Any, timeout: float = 10) -> str:
    async def collect() -> str:
        return b"".join([c async for c in chunks(response)]).decode()

    return await asyncio.wait_for(collect(), timeout)


async def close(response: Any) -> None:
    """The client leaves: as Django's ASGI handler does on a disconnect, the read in
    progress is cancelled, then the response closed."""
    reading = asyncio.ensure_future(anext(chunks(response)))
    await asyncio.sleep(0.05)
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
        await reading
    request_finished.disconnect(close_old_connections)  # as the test client does
    try:
        await sync_to_async(response.close)()
    finally:
        request_finished.connect(close_old_connections)


def api_url(workload: Workload) -> str:
    return f"/api/v1/workloads/{workload.pk}/logs/?tail=5&follow=true"


def portal_url(workload: Workload) -> str:
    return f"/workloads/{workload.pk}/logs/stream/"


@override_settings(STREAMS_PER_USER=100)
def test_healthz_and_the_api_list_answer_at_once_while_streams_are_open(
    cast: Cast, workload: Workload, follow: FakeFollow
) -> None:
    headers = token(cast.owner)

    async def scenario() -> None:
        client = AsyncClient()
        await client.aforce_login(cast.owner)
        opened = []
        for i in range(12):
            if i % 2:
                response = await client.get(portal_url(workload))
            else:
                response = await client.get(api_url(workload), headers=headers)
            assert response.status_code == 200
            assert b"epoch 1" in await first_chunk(response)
            opened.append(response)
        try:
            for url, extra in (("/healthz", {}), ("/api/v1/workloads/", headers)):
                started = time.perf_counter()
                answer = await client.get(url, headers=extra)
                assert answer.status_code == 200
                assert time.perf_counter() - started < 2  # blocked for good before
        finally:
            for response in opened:
                await close(response)

    run(scenario)
    assert streams.slots.held(cast.owner.pk) == 0


@override_settings(STREAMS_PER_USER=2)
def test_a_user_over_the_cap_is_answered_429_and_a_closed_stream_frees_its_place(
    cast: Cast, workload: Workload, follow: FakeFollow
) -> None:
    headers = token(cast.owner)

    async def scenario() -> None:
        client = AsyncClient()
        await client.aforce_login(cast.owner)
        first = await client.get(api_url(workload), headers=headers)
        second = await client.get(portal_url(workload))
        assert [first.status_code, second.status_code] == [200, 200]
        await first_chunk(first)
        await first_chunk(second)

        over = await client.get(api_url(workload), headers=headers)
        assert over.status_code == 429
        assert over.json()["code"] == "too_many_streams"
        assert "2 log streams open" in over.json()["message"]
        portal_over = await client.get(portal_url(workload))
        assert portal_over.status_code == 429
        assert b"event: unavailable" in await first_chunk(portal_over)

        # Another user is not affected.
        teammate = AsyncClient()
        await teammate.aforce_login(cast.teammate)
        theirs = await teammate.get(portal_url(workload))
        assert theirs.status_code == 200
        await close(theirs)

        await close(first)  # the client leaves
        again = await client.get(api_url(workload), headers=headers)
        assert again.status_code == 200
        await close(again)
        await close(second)

    run(scenario)
    assert streams.slots.held(cast.owner.pk) == 0
    # The reader threads stop at the next line once their clients left.
    follow.release.set()
    deadline = time.monotonic() + 5
    while follow.closed < follow.opened and time.monotonic() < deadline:
        time.sleep(0.05)
    assert follow.closed == follow.opened == 4


@override_settings(STREAM_HEARTBEAT_SECONDS=0.2)
def test_the_live_view_sends_keep_alives_while_no_line_comes(
    cast: Cast, workload: Workload, follow: FakeFollow
) -> None:
    async def scenario() -> None:
        client = AsyncClient()
        await client.aforce_login(cast.owner)
        response = await client.get(portal_url(workload))
        assert response["Content-Type"] == "text/event-stream"
        assert b"event: line" in await first_chunk(response)
        assert await first_chunk(response) == b": keep-alive\n\n"
        assert await first_chunk(response) == b": keep-alive\n\n"
        await close(response)

    run(scenario)


@override_settings(STREAM_MAX_SECONDS=1)
def test_every_stream_ends_at_the_longest_duration_with_a_last_word(
    cast: Cast, workload: Workload, follow: FakeFollow
) -> None:
    headers = token(cast.owner)

    async def scenario() -> None:
        client = AsyncClient()
        await client.aforce_login(cast.owner)
        started = time.perf_counter()
        api = await client.get(api_url(workload), headers=headers)
        assert api.status_code == 200
        assert api["Content-Type"] == "text/plain; charset=utf-8"
        assert api["X-Accel-Buffering"] == "no"
        assert (await read_all(api)).splitlines() == [
            "2025-01-01T00:00:00Z epoch 1",
            "[gpupaas] log stream ended: streams stay open for at most 1 s; follow again to go on.",
        ]
        assert 0.9 < time.perf_counter() - started < 5
        portal = await client.get(portal_url(workload))
        text = await read_all(portal)
        assert text.startswith("event: line\n")
        assert text.endswith(
            'event: end\ndata: "The live view streams stay open for at most 1 s; follow the '
            'logs again to go on."\n\n'
        )

    run(scenario)
    assert streams.slots.held(cast.owner.pk) == 0


def test_an_outsider_gets_404_and_no_logs_is_still_a_409(
    cast: Cast, workload: Workload, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pod(**kwargs: Any) -> Iterator[str]:
        raise LogsUnavailable("No pod is running for this workload, so there are no logs yet.")
        yield ""

    monkeypatch.setattr("apps.api.views.workloads.logs.workload_logs", no_pod)
    monkeypatch.setattr("apps.web.views.workloads.logs.workload_logs", no_pod)
    outsider_headers = token(cast.outsider)
    owner_headers = token(cast.owner)

    async def scenario() -> None:
        outsider = AsyncClient()
        await outsider.aforce_login(cast.outsider)
        assert (await outsider.get(api_url(workload), headers=outsider_headers)).status_code == 404
        assert (await outsider.get(portal_url(workload))).status_code == 404
        anonymous = AsyncClient()
        assert (await anonymous.get(api_url(workload))).status_code in (401, 403)
        assert (await anonymous.get(portal_url(workload))).status_code == 302

        owner = AsyncClient()
        await owner.aforce_login(cast.owner)
        refused = await owner.get(api_url(workload), headers=owner_headers)
        assert refused.status_code == 409
        assert refused.json()["code"] == "logs_unavailable"
        portal = await owner.get(portal_url(workload))
        assert (await read_all(portal)).startswith("event: unavailable\n")

    run(scenario)
    assert streams.slots.held(cast.owner.pk) == 0
