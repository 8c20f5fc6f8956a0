"""Every read of a cluster that other apps and the edges need, through the adapter
(:mod:`apps.orchestration.kube`) only: a workload's pods, container logs and events, a
notebook's token, the labelled pods telemetry joins to its metrics, the GPU nodes of the
inventory, and the pods of one node for the node agent.

Objects are found by the names stored on the workload when they were created, or by the
workload label; no name is rebuilt here. Cluster failures come out as the family of
:mod:`apps.orchestration.errors`, which the portal and the API answer alike. The two errors
below say that there is nothing to show yet, which is no failure of the cluster.

Django-side imports are made inside the functions that need them: the node agent
(``python -m apps.telemetry.agent``) imports this module without Django.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import caches

from apps.catalog.resources import DRA_DRIVER, GPU_NODES_SELECTOR
from apps.orchestration import archive
from apps.orchestration import manifests as m
from apps.orchestration.errors import ClusterError
from apps.orchestration.kube import Backoff, Kube, answer_within, api_client_from_config, time_left

if TYPE_CHECKING:
    from apps.catalog.models import Cluster
    from apps.workloads.models import Workload


class LogsUnavailable(RuntimeError):
    """There are no logs to show yet (not placed, no pod, no such replica); says why."""


class NotebookUnavailable(RuntimeError):
    """The notebook cannot be opened yet (not placed, still starting); says why."""


@dataclass(frozen=True)
class ClusterEvent:
    time: datetime | None
    type: str
    reason: str
    message: str
    object: str
    count: int


def _kube(cluster: Cluster) -> Kube:
    from apps.orchestration.clusters import kube_for

    return kube_for(cluster)


def _placed_kube(workload: Workload, unplaced: Exception) -> Kube:
    """The adapter of the workload's cluster; ``unplaced`` is raised when it has none."""
    from apps.orchestration.clusters import cluster_of

    cluster = cluster_of(workload)
    if cluster is None:
        raise unplaced
    return _kube(cluster)


def _pods(kube: Kube, workload: Workload) -> list[dict[str, Any]]:
    pods = kube.list_objects(
        "v1",
        "Pod",
        namespace=workload.team.namespace,
        label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}",
    )
    return sorted(pods, key=lambda p: str(p["metadata"]["name"]))


@dataclass(frozen=True)
class PodRun:
    """One pod of a workload: the replica it runs, and what its log is read and kept by."""

    name: str
    uid: str
    replica: int
    container: str
    created: str
    lost: bool  # being deleted or disrupted: its log goes with it


def _created(meta: Mapping[str, Any]) -> str:
    value = meta.get("creationTimestamp")
    return value.isoformat() if isinstance(value, datetime) else str(value or "")


def _lost(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in conditions
    )


def _of_replica_set(pod: Mapping[str, Any]) -> bool:
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "ReplicaSet" for o in owners)


def pod_runs(pods: Iterable[Mapping[str, Any]]) -> list[PodRun]:
    """Pods as runs, by replica and then by age: a replica's retries in the order they ran.

    An endpoint's pods (a Deployment's) have no index of their own: each is a replica,
    numbered by age (oldest 0), so that every one of them has its log."""
    pods = list(pods)
    served = sorted(
        (p for p in pods if _of_replica_set(p)),
        key=lambda p: (_created(p["metadata"]), str(p["metadata"]["name"])),
    )
    numbers = {str(p["metadata"]["name"]): i for i, p in enumerate(served)}
    runs = [
        PodRun(
            name=str(pod["metadata"]["name"]),
            uid=str(pod["metadata"].get("uid") or pod["metadata"]["name"]),
            replica=numbers.get(str(pod["metadata"]["name"]), archive.replica_of(pod)),
            container=str(pod["spec"]["containers"][0]["name"]),
            created=_created(pod["metadata"]),
            lost=_lost(pod),
        )
        for pod in pods
    ]
    return sorted(runs, key=lambda r: (r.replica, r.created, r.name))


# --- a workload ---------------------------------------------------------------------------


def workload_pods(workload: Workload, *, kube: Kube | None = None) -> list[dict[str, Any]]:
    """The workload's pods (the API server's JSON), by name; ``kube`` as for
    :func:`workload_pod_runs`."""
    unplaced = LogsUnavailable("The workload has not been placed on a cluster yet.")
    return _pods(kube or _placed_kube(workload, unplaced), workload)


def workload_pod_runs(workload: Workload, *, kube: Kube | None = None) -> list[PodRun]:
    """The workload's pods as runs; ``kube``: a cluster other than the workload's own (objects
    left behind where it ran before)."""
    kube = kube or _placed_kube(
        workload, LogsUnavailable("The workload has not been placed on a cluster yet.")
    )
    return pod_runs(_pods(kube, workload))


def pod_run_log(
    workload: Workload, run: PodRun, *, tail_lines: int, kube: Kube | None = None
) -> Iterator[str]:
    """The last ``tail_lines`` lines of one pod's main container, with timestamps."""
    kube = kube or _placed_kube(
        workload, LogsUnavailable("The workload has not been placed on a cluster yet.")
    )
    yield from kube.pod_log(
        run.name,
        workload.team.namespace,
        container=run.container,
        tail_lines=tail_lines,
        follow=False,
    )


def replica_run(runs: list[PodRun], replica: int) -> PodRun:
    """The newest pod of a replica (a retry replaces a failed one)."""
    if not runs:
        raise LogsUnavailable("No pod is running for this workload, so there are no logs yet.")
    mine = [r for r in runs if r.replica == replica]
    if not mine:
        there = len({r.replica for r in runs})
        raise LogsUnavailable(f"Replica {replica} does not exist; there are {there}.")
    return mine[-1]


def workload_logs(
    *, workload: Workload, tail_lines: int = 200, follow: bool = False, replica: int = 0
) -> Iterator[str]:
    """Lines of the main container of one replica (its newest pod); with ``follow`` the
    stream stays open."""
    if tail_lines < 1 or tail_lines > 10_000:
        raise ValueError("tail_lines must be between 1 and 10000.")
    # A followed log is read after the request has returned (a thread, or the server's
    # iteration of the response), outside the request's deadline: opening it gets one of its
    # own, so a cluster that does not answer is named within the same time as everywhere.
    opening = (
        answer_within(settings.ORCHESTRATION_REQUEST_DEADLINE_MS / 1000)
        if follow and time_left() is None
        else nullcontext()
    )
    with opening:
        kube = _placed_kube(
            workload, LogsUnavailable("The workload has not been placed on a cluster yet.")
        )
        run = replica_run(pod_runs(_pods(kube, workload)), replica)
        lines = kube.pod_log(
            run.name,
            workload.team.namespace,
            container=run.container,
            tail_lines=tail_lines,
            follow=follow,
        )
    yield from lines


def _event_time(event: Mapping[str, Any]) -> datetime | None:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if isinstance(value, datetime):
            return value
        if value:
            try:
                return datetime.fromisoformat(str(value))
            except ValueError:
                continue
    return None


# Up to this many objects, a workload's events are asked for per object (a field selector
# on the involved object's name: a few events each); beyond, the namespace's are listed once.
EVENTS_PER_OBJECT_UP_TO = 4


def workload_events(
    *,
    workload: Workload,
    kube: Kube | None = None,
    pods: list[dict[str, Any]] | None = None,
) -> list[ClusterEvent]:
    """Kubernetes events of the workload's stored objects and of its pods, oldest first;
    ``kube`` as for :func:`workload_pod_runs`; ``pods``: the pods already read, if they were.

    A team namespace holds the events of all its workloads: for a workload of a few objects
    only theirs are asked for (one call per object), so the cost does not grow with the
    namespace's history."""
    kube = kube or _placed_kube(
        workload, LogsUnavailable("The workload has not been placed on a cluster yet.")
    )
    namespace = workload.team.namespace
    names = {ref["name"] for ref in workload.k8s_objects or []}
    names.update(p["metadata"]["name"] for p in (_pods(kube, workload) if pods is None else pods))
    if len(names) <= EVENTS_PER_OBJECT_UP_TO:
        events: list[dict[str, Any]] = []
        seen: set[str] = set()
        for name in sorted(names):
            for e in kube.list_objects(
                "v1", "Event", namespace=namespace, field_selector=f"involvedObject.name={name}"
            ):
                key = str((e.get("metadata") or {}).get("uid") or id(e))
                if key not in seen:
                    seen.add(key)
                    events.append(e)
    else:
        events = kube.list_objects("v1", "Event", namespace=namespace)
    result = []
    for e in events:
        involved = e.get("involvedObject") or {}
        if involved.get("name") not in names:
            continue
        result.append(
            ClusterEvent(
                time=_event_time(e),
                type=e.get("type") or "",
                reason=e.get("reason") or "",
                message=e.get("message") or "",
                object=f"{involved.get('kind')}/{involved.get('name')}",
                count=int(e.get("count") or 1),
            )
        )
    return sorted(result, key=lambda e: e.time.timestamp() if e.time else 0.0)


def notebook_path(workload: Workload) -> str:
    """Where the notebook is served on the notebook host."""
    return m.notebook_path(workload.team.namespace, workload.pk)


def notebook_token(workload: Workload) -> str:
    """The Jupyter token, read on demand from the Secret whose name was stored when it was
    created (a notebook owns one Secret: its token).

    It lives only there: never stored in the database, never logged.
    """
    kube = _placed_kube(
        workload, NotebookUnavailable("The notebook has not been placed on a cluster yet.")
    )
    ref = next((r for r in workload.k8s_objects or [] if r.get("kind") == "Secret"), None)
    secret = kube.get("v1", "Secret", ref["name"], ref["namespace"]) if ref else None
    encoded = ((secret or {}).get("data") or {}).get("token")
    if not encoded:
        raise NotebookUnavailable("The notebook is still starting; try again in a moment.")
    return base64.b64decode(encoded).decode("utf-8")


# The gateway asks for a notebook's token on every request: kept a few seconds in the web
# process's own memory (the "gateway-auth" LocMemCache, never a shared store).
TOKEN_CACHE_SECONDS = 30
NOTEBOOK_TOKENS_CACHE = "gateway-auth"


def notebook_token_for_ingress(workload: Workload) -> str:
    """The Jupyter token for the ingress to hand upstream, asked for on every request to a
    notebook: kept in this process's memory for a few seconds, keyed by the notebook's
    admission, so a resumed notebook's new Secret is read again (a resume is a new admission;
    its first start time stays as it was)."""
    admitted = workload.admitted_at.timestamp() if workload.admitted_at else 0
    key = f"notebook-token:{workload.pk}:{admitted}"
    cache = caches[NOTEBOOK_TOKENS_CACHE]
    token = cache.get(key)
    if token is None:
        token = notebook_token(workload)
        cache.set(key, token, TOKEN_CACHE_SECONDS)
    return str(token)


@dataclass(frozen=True)
class NotebookActivity:
    """What Jupyter itself says of a notebook's use."""

    # Its last activity: API requests of the browser (saving, opening, listing), kernel
    # messages and terminals (Jupyter's /api/status), or None if it reports none.
    last_activity: datetime | None
    busy: bool  # a kernel is executing code right now (a long cell is use, however quiet)


# Jupyter's answers are read with a short backoff: an idle check must not hang on one notebook.
_JUPYTER_BACKOFF = Backoff(attempts=2, base_seconds=0.2, max_seconds=1.0)


def _jupyter_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def notebook_activity(workload: Workload) -> NotebookActivity:
    """Ask the notebook's Jupyter server about its activity, as JupyterHub's idle culler does:
    ``api/status`` (``last_activity``) and ``api/kernels`` (each kernel's ``last_activity``
    and ``execution_state``), through the API server's proxy to the notebook's Service.

    Neither request counts as activity itself (``api/status`` is not tracked, the kernel
    list is asked with ``no_track_activity``). The token travels in the query (the API server
    keeps the Authorization header for itself) and never in an error message.
    """
    kube = _placed_kube(
        workload, NotebookUnavailable("The notebook has not been placed on a cluster yet.")
    )
    token = notebook_token(workload)
    ref = next((r for r in workload.k8s_objects or [] if r.get("kind") == "Service"), None)
    if ref is None:
        raise NotebookUnavailable("The notebook is still starting; try again in a moment.")
    base = m.notebook_path(workload.team.namespace, workload.pk)
    try:
        status = kube.service_proxy_get(
            ref["namespace"],
            ref["name"],
            "http",
            f"{base}api/status",
            [("token", token)],
            backoff=_JUPYTER_BACKOFF,
        )
        kernels = kube.service_proxy_get(
            ref["namespace"],
            ref["name"],
            "http",
            f"{base}api/kernels",
            [("token", token), ("no_track_activity", "1")],
            backoff=_JUPYTER_BACKOFF,
        )
    except ClusterError as exc:
        status_code = getattr(exc, "status", None) or "no answer"
        raise NotebookUnavailable(f"Jupyter did not answer ({status_code}).") from None
    except ValueError:
        raise NotebookUnavailable("Jupyter answered something other than JSON.") from None
    moments = [_jupyter_time((status or {}).get("last_activity"))]
    busy = False
    for kernel in kernels if isinstance(kernels, list) else []:
        moments.append(_jupyter_time(kernel.get("last_activity")))
        busy = busy or kernel.get("execution_state") == "busy"
    known = [t for t in moments if t is not None]
    return NotebookActivity(last_activity=max(known) if known else None, busy=busy)


# --- a cluster ----------------------------------------------------------------------------


def labelled_pods(cluster: Cluster) -> list[dict[str, Any]]:
    """Every pod carrying a workload label on the cluster, in one list call."""
    return _kube(cluster).list_owned("v1", "Pod", label_selector=m.LABEL_WORKLOAD)


# Labels the GPU Operator's and the standalone chart's dcgm-exporter pods carry.
EXPORTER_POD_SELECTORS = ("app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter")


def exporter_pod_nodes(cluster: Cluster) -> dict[str, str]:
    """The cluster's dcgm-exporter pods: pod name → the node it runs on (an exporter may name
    its host by its own pod's name)."""
    kube = _kube(cluster)
    found: dict[str, str] = {}
    for selector in EXPORTER_POD_SELECTORS:
        for pod in kube.list_objects("v1", "Pod", label_selector=selector):
            node = (pod.get("spec") or {}).get("nodeName")
            if node:
                found[str(pod["metadata"]["name"])] = str(node)
    return found


def gpu_nodes(cluster: Cluster) -> list[dict[str, Any]]:
    """The cluster's GPU nodes, for the inventory."""
    return _kube(cluster).list_objects("v1", "Node", label_selector=GPU_NODES_SELECTOR)


def dra_slices(cluster: Cluster) -> list[dict[str, Any]]:
    """Every ResourceSlice of the cluster, in one list call; none on a cluster that serves no
    resource.k8s.io/v1."""
    return _kube(cluster).list_objects("resource.k8s.io/v1", "ResourceSlice")


def dra_devices_by_node(
    cluster: Cluster, slices: list[dict[str, Any]] | None = None
) -> dict[str, int]:
    """How many devices NVIDIA's DRA driver publishes for each node (its ResourceSlices, as
    given or read in one list call); empty on a cluster that serves no resource.k8s.io/v1."""
    counts: dict[str, int] = {}
    for piece in dra_slices(cluster) if slices is None else slices:
        spec = piece.get("spec") or {}
        node = spec.get("nodeName") or spec.get("node_name")
        if spec.get("driver") != DRA_DRIVER or not node:
            continue
        counts[node] = counts.get(node, 0) + len(spec.get("devices") or ())
    return counts


def node_pods_reader(
    node_name: str, *, kubeconfig: str | None
) -> Callable[[], list[dict[str, Any]]]:
    """For the node agent: a function listing the pods on one node, from a kubeconfig file or
    (None) the pod's service account. The client is made now, so bad settings fail at once."""
    kube = Kube(api_client_from_config(kubeconfig=kubeconfig))

    def read() -> list[dict[str, Any]]:
        return kube.list_objects("v1", "Pod", field_selector=f"spec.nodeName={node_name}")

    return read
