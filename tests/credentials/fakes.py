"""A stand-in for the clusters that a secret is written to, for tests without kubesim.

Use it by importing the fixture into a test module: ``from tests.credentials.fakes import
_fake_cluster``; tests then ask for ``fake_cluster``. Tasks the services queue are recorded in
``queued`` instead of reaching a broker."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import celery
import pytest

from apps.common import taskqueue
from apps.orchestration import credentials
from apps.orchestration.errors import ClusterUnreachable
from apps.orchestration.kube import Applied


@dataclass
class FakeCluster:
    """Secrets by (namespace, name) → decoded data; ``down`` makes every call unreachable."""

    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    manifests: list[dict[str, Any]] = field(default_factory=list)
    down: bool = False
    queued: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def put(self, manifest: dict[str, Any]) -> Applied:
        if self.down:
            raise ClusterUnreachable("connection refused")
        self.manifests.append(manifest)
        meta = manifest["metadata"]
        key = (meta["namespace"], meta["name"])
        created = key not in self.secrets
        self.secrets[key] = {k: base64.b64decode(v).decode() for k, v in manifest["data"].items()}
        return Applied("Secret", key[0], key[1], created=created, patched=not created)

    def delete(self, api_version: str, kind: str, name: str, namespace: str) -> bool:
        if self.down:
            raise ClusterUnreachable("connection refused")
        return self.secrets.pop((namespace, name), None) is not None


class _App:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def send_task(self, name: str, args: list[Any], **_: Any) -> None:
        self.cluster.queued.append((name, tuple(args)))

    def connection_for_write(self) -> Any:
        """The broker that writes ask before they queue: the test settings' own (memory)."""
        return celery.current_app.connection_for_write()


@pytest.fixture(name="fake_cluster")
def _fake_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    cluster = FakeCluster()
    monkeypatch.setattr(credentials, "enabled_clusters", lambda: [object()])
    monkeypatch.setattr(credentials, "kube_for", lambda _cluster: cluster)
    monkeypatch.setattr(taskqueue, "current_app", _App(cluster))
    yield cluster
