"""Long-lived responses (log follow, the portal's live log view) without holding a worker.

Under ASGI (production: gunicorn with uvicorn's worker, see gpupaas/gunicorn_conf.py) a
stream is an asynchronous iterator served on the worker's event loop. The blocking source
(the Kubernetes client's follow iterator) is stepped on a thread of its own, never on the
one thread where Django runs synchronous views, so a quiet or slow stream holds neither that
thread nor a worker: other requests keep being answered while any number of streams are
open. Under WSGI (``runserver``, the test client) the source is served as before, by a
synchronous iterator.

Every stream:

* counts against its user's cap (``STREAMS_PER_USER``): one over it is answered 429;
* ends after ``STREAM_MAX_SECONDS`` with a last message saying so (follow again to go on);
* may send a heartbeat every ``STREAM_HEARTBEAT_SECONDS`` without a line (the portal's
  server-sent events send a ``: keep-alive`` comment; the API's plain text sends nothing, as
  no byte may be added to a log: clients keep an idle stream open, the CLI has no read
  timeout, and a proxy in front must allow ``STREAM_MAX_SECONDS`` of idle reads);
* stops reading its source when the client disconnects or the stream ends: the reader
  thread stops at the next line it is handed (a blocked read cannot be interrupted from
  outside), closes the source and its database connections.

The cap is counted in the web process: with several workers a user may hold up to
``STREAMS_PER_USER`` streams in each.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

Kind = Literal["line", "error", "end"]
Item = tuple[Kind, Any]

# How long the reader thread waits for room in a full queue before it looks again whether
# the stream was stopped.
_HAND_POLL_SECONDS = 0.5
# Lines read ahead of a slow client before the reader waits.
QUEUE_SIZE = 1000
# How long an API stream waits for its first line (or the error that makes it a 409) before
# it answers 200 without one.
FIRST_ITEM_WAIT_SECONDS = 5.0


def is_asgi(request: Any) -> bool:
    """Whether the request is served by an ASGI server (a DRF request is unwrapped)."""
    return isinstance(getattr(request, "_request", request), ASGIRequest)


# --- the per-user cap ------------------------------------------------------------------------


class StreamSlots:
    """Open streams per user in this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[Any, int] = {}

    def acquire(self, user_key: Any, cap: int) -> bool:
        with self._lock:
            held = self._open.get(user_key, 0)
            if held >= cap:
                return False
            self._open[user_key] = held + 1
            return True

    def release(self, user_key: Any) -> None:
        with self._lock:
            held = self._open.get(user_key, 0) - 1
            if held > 0:
                self._open[user_key] = held
            else:
                self._open.pop(user_key, None)

    def held(self, user_key: Any) -> int:
        with self._lock:
            return self._open.get(user_key, 0)


slots = StreamSlots()


def too_many_message() -> str:
    return (
        f"You already have {settings.STREAMS_PER_USER} log streams open; close one "
        "(or wait for one to end) and try again."
    )


class Slot:
    """One user's claim on a stream; released once, however the stream ends."""

    def __init__(self, user_key: Any) -> None:
        self._user_key = user_key
        self._released = False
        self._lock = threading.Lock()

    @classmethod
    def claim(cls, user_key: Any) -> Slot | None:
        if not slots.acquire(user_key, settings.STREAMS_PER_USER):
            return None
        return cls(user_key)

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        slots.release(self._user_key)


# --- reading a blocking source on a thread ---------------------------------------------------


class ThreadedReader:
    """Steps a blocking iterator on a daemon thread and hands its items to the event loop:
    ``("line", value)`` for each item, then ``("end", None)`` or ``("error", exception)``."""

    def __init__(self, source: Iterator[Any], loop: asyncio.AbstractEventLoop) -> None:
        self._source = source
        self._loop = loop
        self._queue: asyncio.Queue[Item] = asyncio.Queue(maxsize=QUEUE_SIZE)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-reader", daemon=True)
        self._thread.start()

    def _hand(self, item: Item) -> bool:
        """Put an item on the loop's queue, waiting for room; False once stopped."""
        if self._stopped.is_set():
            return False
        try:
            future = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
        except RuntimeError:  # the loop is closed
            return False
        while True:
            try:
                future.result(timeout=_HAND_POLL_SECONDS)
                return True
            except concurrent.futures.TimeoutError:
                if self._stopped.is_set():
                    future.cancel()
                    return False
            except concurrent.futures.CancelledError:
                return False

    def _run(self) -> None:
        from django.db import connections

        try:
            first = True
            for value in self._source:
                if first:
                    # The source looks its workload up before its first line; later lines
                    # come from the cluster only: hold no database connection for the
                    # length of a stream.
                    connections.close_all()
                    first = False
                if not self._hand(("line", value)):
                    return
        except Exception as exc:
            self._hand(("error", exc))
        else:
            self._hand(("end", None))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):  # closing a broken source: best effort
                    close()
            connections.close_all()

    async def get(self, timeout: float | None) -> Item | None:
        """The next item, or None when ``timeout`` seconds pass without one."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None

    def stop(self) -> None:
        self._stopped.set()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def release_connections() -> None:
    """Give this thread's database connections back (to the worker's pool, see
    gpupaas/gunicorn_conf.py), outside a transaction. Called on the request's own thread once
    its view has returned a stream: Django would keep them until the response closes, so each
    open stream would hold a pooled connection for its whole length, and a few dozen streams
    would leave the worker's other requests waiting for one."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


async def _release_request_connections() -> None:
    from asgiref.sync import sync_to_async

    # thread_sensitive: the request's own thread, the one whose connections these are.
    await sync_to_async(release_connections, thread_sensitive=True)()


# --- the response ------------------------------------------------------------------------


Render = Callable[[Kind, Any], str | None]


async def relay(
    reader: ThreadedReader,
    *,
    render: Render,
    limit_chunk: str,
    heartbeat_chunk: str | None,
    first: Item | None = None,
    on_close: Callable[[], None] | None = None,
) -> AsyncIterator[str]:
    """The chunks of a stream: ``render`` turns each item into a chunk (None: nothing to
    send); a heartbeat after ``STREAM_HEARTBEAT_SECONDS`` without one; ``limit_chunk`` and
    the end after ``STREAM_MAX_SECONDS``. Ends at ``end`` or ``error``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.STREAM_MAX_SECONDS
    heartbeat = settings.STREAM_HEARTBEAT_SECONDS if heartbeat_chunk is not None else None
    try:
        item = first
        while True:
            if item is not None:
                kind, value = item
                chunk = render(kind, value)
                if chunk is not None:
                    yield chunk
                if kind != "line":
                    return
            remaining = deadline - loop.time()
            if remaining <= 0:
                yield limit_chunk
                return
            item = await reader.get(min(remaining, heartbeat) if heartbeat else remaining)
            if item is None and heartbeat_chunk is not None and loop.time() < deadline:
                yield heartbeat_chunk
    finally:
        reader.stop()
        if on_close is not None:
            on_close()


class LiveStreamingResponse(StreamingHttpResponse):
    """A streaming response that stops its reader and releases its slot when Django closes
    it, however its body ended (or if it never started: the client left before)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.closers: list[Callable[[], None]] = []

    def close(self) -> None:
        try:
            super().close()
        finally:
            for closer in self.closers:
                closer()


def _limit_text() -> str:
    seconds = settings.STREAM_MAX_SECONDS
    return f"streams stay open for at most {seconds} s; follow again to go on"


def live_response(
    source: Callable[[], Iterator[Any]],
    *,
    render: Render,
    limit_chunk: str,
    heartbeat_chunk: str | None,
    slot: Slot,
    content_type: str,
) -> LiveStreamingResponse:
    """An ASGI streaming response over ``source()``; the reader starts when Django starts
    sending the body."""

    async def body() -> AsyncIterator[str]:
        await _release_request_connections()
        reader = ThreadedReader(source(), asyncio.get_running_loop())
        response.closers.append(reader.stop)
        async for chunk in relay(
            reader,
            render=render,
            limit_chunk=limit_chunk,
            heartbeat_chunk=heartbeat_chunk,
            on_close=slot.release,
        ):
            yield chunk

    response = LiveStreamingResponse(body(), content_type=content_type)
    response.closers.append(slot.release)
    _stream_headers(response)
    return response


def _stream_headers(response: StreamingHttpResponse) -> None:
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # let a proxy pass lines through as they come


# --- the portal's server-sent events ---------------------------------------------------------


def sse_limit_message() -> str:
    return f"The live view {_limit_text().replace('follow again', 'follow the logs again')}."


def user_key(request: HttpRequest) -> Any:
    user = request.user
    return user.pk if user.is_authenticated else None


def sse_response(
    request: HttpRequest,
    source: Callable[[], Iterator[str]],
    *,
    sse: Callable[[str, str], str],
    render: Render,
    sync_stream: Callable[[], Iterator[str]],
) -> StreamingHttpResponse:
    """The portal's live view: under ASGI a relayed stream with heartbeats and the cap;
    under WSGI ``sync_stream`` as before."""
    if not is_asgi(request):
        response = StreamingHttpResponse(sync_stream(), content_type="text/event-stream")
        _stream_headers(response)
        return response
    slot = Slot.claim(user_key(request))
    if slot is None:
        refused = StreamingHttpResponse(
            _once(sse("unavailable", too_many_message())),
            content_type="text/event-stream",
            status=429,
        )
        _stream_headers(refused)
        return refused
    return live_response(
        source,
        render=render,
        limit_chunk=sse("end", sse_limit_message()),
        heartbeat_chunk=": keep-alive\n\n",
        slot=slot,
        content_type="text/event-stream",
    )


async def _once(chunk: str) -> AsyncIterator[str]:
    yield chunk


# --- the API's plain-text follow ---------------------------------------------------------


class PendingStream(StreamingHttpResponse):
    """What a synchronous API view returns for a stream under ASGI: the status is decided
    once the source's first item has arrived, off the view's thread (see
    :func:`opens_streams`): a line opens the stream, an error before it is answered by
    ``on_error`` (the view's error answer, e.g. 409)."""

    def __init__(
        self,
        lines: Iterator[str],
        *,
        render: Render,
        on_error: Callable[[Exception], Any],
        slot: Slot,
    ) -> None:
        super().__init__(iter(()), content_type="text/plain; charset=utf-8")
        self._lines = lines
        self._render = render
        self._on_error = on_error
        self._slot = slot
        _stream_headers(self)

    async def open(self) -> Any:
        from asgiref.sync import sync_to_async

        reader: ThreadedReader | None = None
        try:
            await _release_request_connections()
            reader = ThreadedReader(self._lines, asyncio.get_running_loop())
            # A quiet source opens the stream without a line after a moment.
            first = await reader.get(FIRST_ITEM_WAIT_SECONDS)
            if first is not None and first[0] == "error":
                reader.stop()
                self._slot.release()
                return await sync_to_async(self._on_error)(first[1])
        except BaseException:
            if reader is not None:
                reader.stop()
            self._slot.release()
            raise
        response = LiveStreamingResponse(
            relay(
                reader,
                render=self._render,
                limit_chunk=self._render("line", f"[gpupaas] log stream ended: {_limit_text()}.")
                or "",
                heartbeat_chunk=None,
                first=first,
                on_close=self._slot.release,
            ),
            content_type=self["Content-Type"],
            status=self.status_code,
        )
        for header, value in self.items():
            response[header] = value
        response.closers += [reader.stop, self._slot.release]
        return response


def opens_streams(view: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps a synchronous (DRF) view so that a :class:`PendingStream` it returns is opened
    on the event loop. The view itself (authentication, permissions, throttles) runs as
    Django runs any synchronous view."""
    import functools

    from asgiref.sync import markcoroutinefunction, sync_to_async

    @functools.wraps(view)
    async def entry(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        response = await sync_to_async(view)(request, *args, **kwargs)
        if isinstance(response, PendingStream):
            return await response.open()
        return response

    return markcoroutinefunction(entry)
