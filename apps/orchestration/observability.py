"""What a user sees of their workload inside the cluster: container logs and events."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.orchestration import manifests as m
from apps.orchestration.clusters import ClusterConfigError, kube_for
from apps.orchestration.kube import ClusterUnreachable, with_backoff
from apps.orchestration.selectors import cluster_of
from apps.workloads.models import Workload


class LogsUnavailable(RuntimeError):
    """Logs cannot be shown now; the message says why in words a user understands."""


@dataclass(frozen=True)
class ClusterEvent:
    time: datetime | None
    type: str
    reason: str
    message: str
    object: str
    count: int


def _core(workload: Workload) -> k8s.CoreV1Api:
    cluster = cluster_of(workload)
    if cluster is None:
        raise LogsUnavailable("The workload has not been placed on a cluster yet.")
    try:
        return k8s.CoreV1Api(kube_for(cluster).api_client)
    except ClusterConfigError as exc:
        raise LogsUnavailable(str(exc)) from exc


def workload_pods(workload: Workload) -> list[Any]:
    core = _core(workload)
    pods = with_backoff(
        lambda: core.list_namespaced_pod(
            workload.team.namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ),
        what="list pods",
    )
    return sorted(pods.items, key=lambda p: p.metadata.name)


def workload_logs(
    *, workload: Workload, tail_lines: int = 200, follow: bool = False, replica: int = 0
) -> Iterator[str]:
    """Lines of the main container of one replica; with ``follow`` the stream stays open."""
    if tail_lines < 1 or tail_lines > 10_000:
        raise ValueError("tail_lines must be between 1 and 10000.")
    try:
        pods = workload_pods(workload)
    except ClusterUnreachable as exc:
        raise LogsUnavailable("The cluster is unreachable; try again in a moment.") from exc
    if not pods:
        raise LogsUnavailable("No pod is running for this workload, so there are no logs yet.")
    if replica >= len(pods) or replica < 0:
        raise LogsUnavailable(f"Replica {replica} does not exist; there are {len(pods)}.")
    pod = pods[replica]
    container = pod.spec.containers[0].name
    core = _core(workload)
    try:
        response = core.read_namespaced_pod_log(
            pod.metadata.name,
            workload.team.namespace,
            container=container,
            tail_lines=tail_lines,
            follow=follow,
            timestamps=True,
            _preload_content=False,
        )
    except ApiException as exc:
        raise LogsUnavailable(
            f"The cluster did not return logs for {pod.metadata.name}: {exc.reason}"
        ) from exc
    except Exception as exc:  # network errors from urllib3
        raise LogsUnavailable(f"The cluster did not return logs: {exc}") from exc
    try:
        for line in response.stream(decode_content=True) if follow else [response.data]:
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
            yield from text.splitlines()
    finally:
        response.release_conn()


def workload_events(*, workload: Workload) -> list[ClusterEvent]:
    """Kubernetes events of the workload's objects and pods, oldest first."""
    names = {ref["name"] for ref in workload.k8s_objects or []}
    core = _core(workload)
    try:
        names.update(p.metadata.name for p in workload_pods(workload))
        events = with_backoff(
            lambda: core.list_namespaced_event(workload.team.namespace), what="list events"
        ).items
    except ClusterUnreachable as exc:
        raise LogsUnavailable("The cluster is unreachable; try again in a moment.") from exc
    result = [
        ClusterEvent(
            time=e.last_timestamp or e.event_time or e.first_timestamp,
            type=e.type or "",
            reason=e.reason or "",
            message=e.message or "",
            object=f"{e.involved_object.kind}/{e.involved_object.name}",
            count=e.count or 1,
        )
        for e in events
        if e.involved_object and e.involved_object.name in names
    ]
    return sorted(result, key=lambda e: e.time.timestamp() if e.time else 0.0)
