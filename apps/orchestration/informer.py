"""A local copy of one kind of object, kept current by list + watch.

The usual informer pattern: list once (the copy and a resourceVersion), then watch from that
version; every event moves the version on, bookmarks too; a 410 Gone (the version is older
than the server keeps) lists again and tells the caller what changed meanwhile; a connection
that cannot be made or breaks is made again with jittered exponential backoff, from the last
version seen, so nothing is missed and nothing is listed twice.

No Django here: the caller decides what a change means (:mod:`apps.orchestration.watch`).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apps.orchestration.errors import ClusterError
from apps.orchestration.kube import Kube, WatchExpired

log = logging.getLogger(__name__)

# Called with the objects that changed (their new form, or the last known form of those
# deleted) and whether the change came from a relist.
OnChange = Callable[[list[dict[str, Any]], bool], None]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


@dataclass
class InformerStats:
    lists: int = 0
    relists: int = 0  # lists after a 410 Gone
    watches: int = 0  # watch connections made
    reconnects: int = 0  # connections made again after an error
    events: int = 0
    bookmarks: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ReconnectBackoff:
    base_seconds: float = 0.5
    max_seconds: float = 30.0

    def delay(self, failures: int) -> float:
        raw = min(self.max_seconds, self.base_seconds * 2 ** max(0, failures - 1))
        return raw * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not security


class Informer:
    """One kind, all namespaces, optionally filtered by a label selector."""

    def __init__(
        self,
        kube: Kube,
        api_version: str,
        kind: str,
        *,
        label_selector: str | None = None,
        on_change: OnChange | None = None,
        watch_seconds: int = 300,
        backoff: ReconnectBackoff | None = None,
    ) -> None:
        self.kube = kube
        self.api_version = api_version
        self.kind = kind
        self.label_selector = label_selector
        self.on_change = on_change or (lambda objects, relisted: None)
        self.watch_seconds = watch_seconds
        self.backoff = backoff or ReconnectBackoff()
        self.resource_version = ""
        self.stats = InformerStats()
        self._store: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.synced = threading.Event()

    # --- the copy ---------------------------------------------------------------------------

    def objects(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._store.values())

    def seed(self, objects: list[dict[str, Any]], resource_version: str) -> None:
        """Start from a copy and a version instead of listing (a restart from saved state)."""
        with self._lock:
            self._store = {object_key(o): o for o in objects}
        self.resource_version = resource_version

    def relist(self) -> list[dict[str, Any]]:
        """List again; the copy becomes the list. Returns what differs from the old copy."""
        items, version = self.kube.list_collection(
            self.api_version, self.kind, label_selector=self.label_selector
        )
        fresh = {object_key(o): o for o in items}
        with self._lock:
            old, self._store = self._store, fresh
        self.resource_version = version
        self.stats.lists += 1
        changed = [
            o
            for key, o in fresh.items()
            if (old.get(key) or {}).get("metadata", {}).get("resourceVersion")
            != o["metadata"].get("resourceVersion")
        ]
        changed.extend(o for key, o in old.items() if key not in fresh)
        return changed

    def apply(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """One watch event into the copy; the changed object, or None for a bookmark."""
        kind, obj = event.get("type"), event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.resource_version = str(version)
        if kind == "BOOKMARK":
            self.stats.bookmarks += 1
            return None
        self.stats.events += 1
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                self._store.pop(key, None)
            else:
                self._store[key] = obj
        return obj

    # --- the loop ---------------------------------------------------------------------------

    def watch_once(self, stop: threading.Event) -> None:
        """List if there is no version yet, then follow one watch connection to its end."""
        if not self.resource_version:
            listed = self.relist()
            self.synced.set()
            self.on_change(listed, True)
        self.stats.watches += 1
        stream = self.kube.watch_collection(
            self.api_version,
            self.kind,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            timeout_seconds=self.watch_seconds,
        )
        try:
            for event in stream:
                changed = self.apply(event)
                if changed is not None:
                    self.on_change([changed], False)
                if stop.is_set():
                    return
        finally:
            stream.close()  # type: ignore[attr-defined]

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: watch, relist on 410 Gone, reconnect with backoff on errors."""
        failures = 0
        while not stop.is_set():
            try:
                self.watch_once(stop)
                failures = 0  # the server ended the watch (timeout): go on from the version
            except WatchExpired as exc:
                log.info("%s: %s; listing again", self.kind, exc)
                self.stats.relists += 1
                self.resource_version = ""
            except ClusterError as exc:
                failures += 1
                self.stats.reconnects += 1
                self.stats.errors.append(str(exc))
                del self.stats.errors[:-20]
                delay = self.backoff.delay(failures)
                log.warning("%s watch: %s; again in %.1f s", self.kind, exc, delay)
                stop.wait(delay)
            except Exception as exc:  # a bug must not stop following the cluster silently
                failures += 1
                self.stats.errors.append(f"{type(exc).__name__}: {exc}")
                log.exception("%s watch failed", self.kind)
                stop.wait(self.backoff.delay(failures))

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name=f"watch-{self.kind}", daemon=True
        )
        thread.start()
        return thread
