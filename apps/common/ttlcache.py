"""A small in-process cache whose entries expire: the portal's recent "yes" to the proxy's
authorisation calls, kept a few seconds per session, cookie or key (GATEWAY_AUTH_CACHE_SECONDS).

In the process's memory on purpose: a hit costs no network round trip, which is the point. Each
web process keeps its own; an entry lives at most its time to live, so whatever is revoked
stops within that time in every process.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class TtlCache(Generic[V]):
    """Entries kept ``ttl`` seconds after they were put, at most ``max_entries`` (the oldest
    put goes first)."""

    def __init__(self, max_entries: int = 10_000) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[0] <= now:
                del self._entries[key]
                return None
            return entry[1]

    def put(self, key: Hashable, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (time.monotonic() + ttl, value)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
