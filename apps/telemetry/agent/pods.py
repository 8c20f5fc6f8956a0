"""Which pod a GPU process belongs to: its cgroup names the pod UID; the node's pods name it."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

# cgroupfs: /kubepods/burstable/pod<uid>/<container>; systemd: kubepods-burstable-pod<uid>.slice
POD_UID = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)


@dataclass(frozen=True)
class PodRef:
    namespace: str
    pod: str
    container: str = ""


class PodResolver(Protocol):
    def pod_of(self, pid: int) -> PodRef | None: ...


def pod_uid_from_cgroup(text: str) -> str | None:
    match = POD_UID.search(text)
    return match.group(1).replace("_", "-") if match else None


class NoPods:
    """Outside Kubernetes: processes belong to no pod."""

    def pod_of(self, pid: int) -> PodRef | None:
        return None


class CgroupPodResolver:
    """Reads /proc/<pid>/cgroup; ``directory()`` maps pod UIDs to pods (cached ``ttl`` s)."""

    def __init__(
        self,
        directory: Callable[[], Mapping[str, PodRef]],
        *,
        proc: Path = Path("/proc"),
        ttl: float = 15.0,
    ) -> None:
        self._directory = directory
        self._proc = proc
        self._ttl = ttl
        self._pods: Mapping[str, PodRef] = {}
        self._at = 0.0

    def pod_of(self, pid: int) -> PodRef | None:
        try:
            text = (self._proc / str(pid) / "cgroup").read_text()
        except OSError:
            return None
        uid = pod_uid_from_cgroup(text)
        if uid is None:
            return None
        if uid not in self._pods or time.monotonic() - self._at > self._ttl:
            self._pods = self._directory()
            self._at = time.monotonic()
        return self._pods.get(uid)


def pods_by_uid(pods: Iterable[Mapping[str, Any]]) -> dict[str, PodRef]:
    """Pods (the API server's JSON) by UID, each named by namespace, name, first container."""
    result = {}
    for pod in pods:
        meta = pod["metadata"]
        containers = (pod.get("spec") or {}).get("containers") or []
        result[meta["uid"]] = PodRef(
            meta["namespace"], meta["name"], containers[0]["name"] if containers else ""
        )
    return result


def cluster_directory(node_name: str, kubeconfig: str | None) -> Callable[[], dict[str, PodRef]]:
    """Pods on this node from the cluster's API (in-cluster, or a kubeconfig)."""
    from apps.orchestration.cluster_reads import node_pods_reader

    read = node_pods_reader(node_name, kubeconfig=kubeconfig)
    return lambda: pods_by_uid(read())
