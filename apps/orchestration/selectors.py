"""Orchestration's reads of the database: the manifest inputs of teams and workloads
(TeamSpec, WorkloadSpec), which workloads live on a cluster, and a workload's logs and
events — from the cluster (:mod:`apps.orchestration.cluster_reads`) while its objects exist,
from the archive after — and a sweep's trials."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.core import ALLOCATION_DEVICE_PLUGIN, ALLOCATION_DRA, ALLOCATION_MODES
from apps.catalog.models import Cluster, ClusterNode, GpuClass
from apps.catalog.resources import (
    GpuClassSpec,
    gpu_claim,
    gpu_resources,
    mig_claim,
    mig_resource,
)
from apps.orchestration import archive, cluster_reads
from apps.orchestration import manifests as m
from apps.orchestration import status as st

# Which cluster a workload lives on is read where its adapter is made (clusters), and named
# here too for the readers of orchestration's selectors.
from apps.orchestration.clusters import cluster_of as cluster_of
from apps.orchestration.clusters import enabled_clusters as enabled_clusters
from apps.orchestration.models import (
    HomeVolume,
    LiveMetrics,
    WorkloadArchive,
    WorkloadLogArchive,
)
from apps.orchestration.names import stored_name
from apps.orchestration.notebook_access import (
    gateway_shape,
    proxy_namespace,
    workload_ingress_settings,
)
from apps.reservations.selectors import effective_limits
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import preemption_grace_seconds

# Workloads whose objects should exist, and those whose objects should be gone.
LIVE_STATES = (wl.ADMITTED, wl.STARTING, wl.RUNNING)
GONE_STATES = (
    wl.SUCCEEDED,
    wl.FAILED,
    wl.CANCELLED,
    wl.EXPIRED,
    wl.PREEMPTED,
    wl.SUSPENDED,
    wl.QUEUED,
)
# Pod annotations a request may carry through (the simulated cluster's behaviour knobs).
PASS_THROUGH_ANNOTATION_PREFIXES = ("kubesim.io/",)


_Workloads = TypeVar("_Workloads", bound=QuerySet[Workload])


def placed_on(workloads: _Workloads, cluster: Cluster, *, single: bool | None = None) -> _Workloads:
    """Those of ``workloads`` that live on ``cluster``: placed there, or not placed yet while
    it is the only enabled cluster (``single``: whether it is, when the caller knows), as
    :func:`cluster_of` says."""
    if single is None:
        single = enabled_clusters().count() == 1
    mine = workloads.filter(cluster=cluster)
    return (mine | workloads.filter(cluster__isnull=True)) if single else mine


def gpu_class_spec(gpu_class: GpuClass) -> GpuClassSpec:
    return gpu_class.spec()


def team_spec(team: Team) -> m.TeamSpec:
    # The limits in effect now: approved quota grants and open reservations included.
    limits = effective_limits(team, now=timezone.now())
    return m.TeamSpec(
        slug=team.slug,
        namespace=team.namespace,
        quotas=tuple(
            m.TeamQuotaSpec(gpu_class_spec(gpu_class), limit) for gpu_class, limit in limits
        ),
        ingress_namespace=proxy_namespace(),
        object_counts=object_counts(),
        volume_size=settings.TEAM_VOLUME_SIZE,
        volume_storage_class=settings.TEAM_VOLUME_STORAGE_CLASS,
        storage_quota=settings.TEAM_STORAGE_QUOTA,
        portal_service_account=settings.K8S_PORTAL_SERVICE_ACCOUNT,
        portal_team_role=settings.K8S_PORTAL_TEAM_ROLE,
        gateway=gateway_shape(),
        endpoint_host=endpoint_route_host(),
        endpoint_auth_url=settings.ENDPOINT_AUTH_URL,
        # One host for all notebooks (a path each); under a wildcard each has a host of its own.
        notebook_host="" if settings.NOTEBOOK_WILDCARD_HOST else route_host(settings.NOTEBOOK_HOST),
        notebook_auth_url=settings.NOTEBOOK_AUTH_URL,
    )


def route_host(address: str) -> str:
    """A host setting as a route names it: without scheme or port (development serves
    endpoints and notebooks on one, e.g. ENDPOINT_HOST=http://serve.localhost:8890)."""
    return address.split("://")[-1].rstrip("/").rsplit(":", 1)[0]


def endpoint_route_host() -> str:
    """The endpoint host as a route names it."""
    return route_host(settings.ENDPOINT_HOST)


def placement_replicas(
    placement: Any, node_uuids: Mapping[str, Sequence[str]] | None = None
) -> tuple[m.ReplicaPlacement, ...]:
    """The scheduler's placement JSON as one entry per replica (empty when not placed).

    Each replica names its node and the indices of its GPUs there; ``node_uuids`` (from the
    node inventory) turns indices into GPU UUIDs where the sharing mode pins devices (HAMi).
    """
    entries = placement.get("replicas", []) if isinstance(placement, Mapping) else placement
    result = []
    for entry in entries or []:
        if not (isinstance(entry, Mapping) and entry.get("node")):
            continue
        node = str(entry["node"])
        uuids = tuple(str(u) for u in entry.get("gpu_uuids") or ())
        if not uuids and node_uuids and node in node_uuids:
            known = node_uuids[node]
            uuids = tuple(known[i] for i in entry.get("gpus") or () if 0 <= int(i) < len(known))
        result.append(m.ReplicaPlacement(node=node, gpu_uuids=uuids))
    return tuple(result)


def node_uuids_for(workload: Workload) -> dict[str, list[str]]:
    """GPU UUIDs of the nodes a HAMi workload was placed on (other modes need none)."""
    if workload.gpu_class.sharing_mode != "hami" or not workload.placement:
        return {}
    nodes = [r.node for r in placement_replicas(workload.placement)]
    rows = ClusterNode.objects.filter(name__in=nodes)
    if workload.cluster_id is not None:
        rows = rows.filter(cluster_id=workload.cluster_id)
    return {n.name: list(n.gpu_uuids or []) for n in rows}


def home_claim_name(workload: Workload) -> str:
    """The owner's home volume in the workload's team: the name stored when it was first
    made (HomeVolume), else the id-keyed name it will get. Never derived from the username."""
    stored = (
        HomeVolume.objects.filter(user_id=workload.owner_id, team_id=workload.team_id)
        .values_list("claim", flat=True)
        .first()
    )
    return stored or m.home_claim_name(workload.owner_id)


def object_counts() -> dict[str, int]:
    """The object-count limits of every team namespace (settings TEAM_MAX_*)."""
    return {
        "count/jobs.batch": settings.TEAM_MAX_JOBS,
        "count/pods": settings.TEAM_MAX_PODS,
        "count/secrets": settings.TEAM_MAX_SECRETS,
        "count/configmaps": settings.TEAM_MAX_CONFIGMAPS,
        "count/services": settings.TEAM_MAX_SERVICES,
        "count/persistentvolumeclaims": settings.TEAM_MAX_VOLUME_CLAIMS,
    }


def restart_count(workload: Workload) -> int:
    """Starts of this workload that ended back in the queue: requeues after a preemption or a
    lost replica (through ``preempted``), and a gang's retries after a failure (straight from
    starting or running)."""
    return workload.events.filter(
        from_state__in=(wl.PREEMPTED, wl.STARTING, wl.RUNNING), to_state=wl.QUEUED
    ).count()


def pass_through_annotations(params: Mapping[str, Any]) -> dict[str, str]:
    """The pod annotations a request carries through (PASS_THROUGH_ANNOTATION_PREFIXES); an
    endpoint's revision may carry its own (rolled out and back with it)."""
    revision_annotations = (params.get("endpoint") or {}).get("pod_annotations") or {}
    return {
        str(k): str(v)
        for k, v in {**(params.get("pod_annotations") or {}), **revision_annotations}.items()
        if str(k).startswith(PASS_THROUGH_ANNOTATION_PREFIXES)
    }


def workload_spec(workload: Workload) -> m.WorkloadSpec:
    gpu = gpu_class_spec(workload.gpu_class)
    limits = dict(gpu_resources(workload.gpu_milli, gpu).limits)
    profiles = {
        r.get("mig_profile")
        for r in (workload.placement or {}).get("replicas", [])
        if isinstance(r, Mapping) and r.get("mig_profile")
    }
    claim = None
    if allocation_of(workload) == ALLOCATION_DRA:
        claim = gpu_claim(workload.gpu_milli, gpu)
    if gpu.sharing_mode == "mig" and len(profiles) == 1:
        # The scheduler placed the request on a free instance of this profile: ask for it.
        profile = str(profiles.pop())
        limits = {mig_resource(profile): "1"}
        if claim is not None:
            claim = mig_claim(profile, gpu)
    params = workload.params or {}
    grid = {str(k): [str(x) for x in v] for k, v in (params.get("grid") or {}).items()}
    notebook = workload.kind == wl.KIND_NOTEBOOK
    return m.WorkloadSpec(
        id=workload.pk,
        name=workload.name,
        kind=workload.kind,
        team_slug=workload.team.slug,
        namespace=workload.team.namespace,
        owner=workload.owner.get_username(),
        image=workload.image.reference,
        read_only_root=workload.image.read_only_root,
        gpu_limits=limits,
        gpu_product=workload.gpu_class.product_label,
        sharing_mode=workload.gpu_class.sharing_mode,
        priority_class=workload.priority_class,
        replicas=workload.replicas,
        gpus_per_replica=max(1, workload.gpu_milli // 1000),
        cpu_milli=workload.cpu_milli,
        memory_mib=workload.memory_mib,
        command=tuple(workload.command or ()),
        args=tuple(workload.args or ()),
        env={str(k): str(v) for k, v in (workload.env or {}).items()},
        secret_env=tuple(
            m.SecretEnv(secret=str(r["k8s_name"]), env=str(r.get("env") or ""), key=str(r["key"]))
            for r in workload.secrets or ()
            if isinstance(r, Mapping) and r.get("k8s_name")
        ),
        max_runtime_seconds=workload.max_runtime_seconds,
        retries=workload.retries,
        placement=placement_replicas(workload.placement, node_uuids_for(workload)),
        pod_annotations=pass_through_annotations(params),
        sweep_grid=grid,
        **(workload_ingress_settings(workload) if notebook else {}),
        sweep_index=workload.trial_index or 0,
        home_claim=home_claim_name(workload) if notebook else "",
        home_size=settings.NOTEBOOK_HOME_SIZE,
        grace_seconds=preemption_grace_seconds()[workload.priority_class],
        restart_count=restart_count(workload),
        team_claim=m.team_claim_name(),
        datasets=dataset_mounts(workload.datasets),
        endpoint=endpoint_shape(workload),
        token_secret_name=stored_name(workload, "Secret") if notebook else "",
        gpu_claim=claim,
    )


def endpoint_replicas_seen(workload: Workload) -> list[st.ReplicaSeen]:
    """An endpoint's replicas as its cluster runs them (one list call): the node each pod is
    bound to and its state. Raises LogsUnavailable (not placed) or ClusterError."""
    return st.replicas_seen(cluster_reads.workload_pods(workload))


def allocation_of(workload: Workload) -> str:
    """How this workload gets its GPUs: the class's allocation mode when it was admitted
    (recorded with its placement), so an admin switching the class leaves running work as it
    is; not admitted yet, the class's current one."""
    placement = workload.placement if isinstance(workload.placement, Mapping) else {}
    recorded = placement.get("allocation")
    if recorded in ALLOCATION_MODES:
        return str(recorded)
    if placement.get("replicas"):
        return ALLOCATION_DEVICE_PLUGIN  # admitted before classes had a mode
    return workload.gpu_class.allocation_mode or ALLOCATION_DEVICE_PLUGIN


def endpoint_shape(workload: Workload) -> m.EndpointShape | None:
    """An endpoint's recorded settings as its objects state them (None: not an endpoint, or
    one recorded without them, which cannot be started)."""
    recorded = (workload.params or {}).get("endpoint")
    if workload.kind != wl.KIND_INFERENCE or not isinstance(recorded, Mapping):
        return None
    host = endpoint_route_host()
    return m.EndpointShape(
        port=int(recorded.get("port") or 8000),
        health_path=str(recorded.get("health_path") or "/health"),
        model_path=str(recorded.get("model_path") or ""),
        model_uri=str(recorded.get("model_uri") or ""),
        model_secret=str(recorded.get("model_secret_k8s") or ""),
        model_secret_keys=tuple(str(k) for k in recorded.get("model_secret_keys") or ()),
        revision=int(recorded.get("revision") or 1),
        progress_deadline_seconds=settings.ENDPOINT_PROGRESS_DEADLINE_SECONDS,
        # The API server wants the deadline above it.
        min_ready_seconds=min(10, settings.ENDPOINT_PROGRESS_DEADLINE_SECONDS // 2),
        host=host,
        auth_url=settings.ENDPOINT_AUTH_URL if host else "",
        tls_secret=settings.NOTEBOOK_TLS_SECRET if host else "",
        ingress_namespace=proxy_namespace(),
        gateway=gateway_shape() if host else None,
    )


def dataset_mounts(recorded: Any) -> tuple[m.DatasetMount, ...]:
    """The datasets a workload recorded at submit (resolved: claim or prefix, secret)."""
    return tuple(
        m.DatasetMount(
            name=str(d["name"]),
            claim=str(d.get("claim") or ""),
            uri=str(d.get("uri") or ""),
            secret=str(d.get("secret") or ""),
            secret_keys=tuple(str(k) for k in d.get("secret_keys") or ()),
        )
        for d in recorded or ()
        if isinstance(d, Mapping) and d.get("name")
    )


# --- logs and events: from the cluster while the objects exist, from the archive after -------


def _objects_exist(workload: Workload) -> bool:
    return workload.state in LIVE_STATES or bool(workload.k8s_objects)


def _ran(workload: Workload) -> bool:
    return bool(workload.admitted_at or workload.started_at or workload.cluster_id)


def _never_placed(what: str) -> str:
    return (
        "The workload has not been placed on a cluster: it ended before it ran, so it has "
        f"no {what}."
    )


def _nothing_kept(workload: Workload, what: str) -> str:
    note = WorkloadArchive.objects.filter(workload=workload).values_list("note", flat=True).first()
    if note:
        return f"No {what} were kept: {note}."
    ended = workload.finished_at or workload.updated_at
    days = settings.LOG_ARCHIVE_RETENTION_DAYS
    if ended and ended < timezone.now() - timedelta(days=days):
        return f"{what.capitalize()} are kept {days} days after a workload ends; these are gone."
    return f"No {what} were kept for this workload: it had no pods when it ended."


def archived_log(
    *, workload: Workload, replica: int = 0, attempt: int | None = None
) -> WorkloadLogArchive | None:
    """The archived log to show for a replica, or None when the cluster has it (the objects
    exist: the workload is live, or ended and not cleaned up yet).

    An ``attempt`` is always the archive's (earlier attempts outlive the pods that ran them);
    without one, the replica's latest. Raises :class:`cluster_reads.LogsUnavailable` with the reason
    when the objects are gone and nothing was kept."""
    rows = WorkloadLogArchive.objects.filter(workload=workload)
    if attempt is not None:
        row = rows.filter(replica=replica, attempt=attempt).first()
        if row is None:
            kept = list(rows.filter(replica=replica).values_list("attempt", flat=True))
            also = f"; kept: {', '.join(map(str, kept))}" if kept else ""
            raise cluster_reads.LogsUnavailable(
                f"Replica {replica} has no archived attempt {attempt}{also}."
            )
        return row
    if workload.state in LIVE_STATES:
        return None
    row = rows.filter(replica=replica).order_by("-attempt").first()
    if row is not None or workload.k8s_objects:
        return row
    replicas = sorted(set(rows.values_list("replica", flat=True)))
    if replicas:
        raise cluster_reads.LogsUnavailable(
            f"Replica {replica} was not archived; archived replicas: "
            f"{', '.join(map(str, replicas))}."
        )
    if workload.is_terminal and not _ran(workload):
        raise cluster_reads.LogsUnavailable(_never_placed("logs"))
    if not _ran(workload):
        return None  # never placed: the cluster read says so
    raise cluster_reads.LogsUnavailable(_nothing_kept(workload, "logs"))


def archived_log_lines(row: WorkloadLogArchive, *, tail_lines: int | None = None) -> list[str]:
    """An archived log's last ``tail_lines`` lines (all without), opened by a notice when its
    beginning was not kept and the lines shown reach back to what was."""
    lines = row.text.splitlines()
    if not lines and row.note:
        return [f"[gpupaas] {row.note}"]
    shown = lines[-tail_lines:] if tail_lines else lines
    if row.truncated and len(shown) == len(lines):
        shown = [archive.truncation_notice(row.bytes), *shown]
    return shown


def workload_log_download(
    *, workload: Workload, replica: int = 0, attempt: int | None = None
) -> tuple[str, list[str]]:
    """A file name and the lines of one replica's whole kept log: the archive's, or the end
    of the live log within the same cap (LOG_ARCHIVE_MAX_BYTES_PER_REPLICA)."""
    row = archived_log(workload=workload, replica=replica, attempt=attempt)
    if row is not None:
        return archive.log_filename(workload.pk, row.replica, row.attempt), archived_log_lines(row)
    run = cluster_reads.replica_run(cluster_reads.workload_pod_runs(workload), replica)
    cap = settings.LOG_ARCHIVE_MAX_BYTES_PER_REPLICA
    asked = archive.lines_for_cap(cap)
    capped = archive.keep_tail(
        cluster_reads.pod_run_log(workload, run, tail_lines=asked), max_bytes=cap, asked_lines=asked
    )
    lines = capped.text.splitlines()
    if capped.truncated:
        lines.insert(0, archive.truncation_notice(capped.bytes))
    return archive.log_filename(workload.pk, replica), lines


@dataclass(frozen=True)
class LogChoices:
    """What a replica picker offers: the replicas, and the archived attempts of one."""

    replicas: tuple[int, ...]
    attempts: tuple[int, ...]


def log_choices(workload: Workload, replica: int = 0) -> LogChoices:
    kept = list(
        WorkloadLogArchive.objects.filter(workload=workload).values_list("replica", "attempt")
    )
    if workload.kind == wl.KIND_SWEEP:
        expected = len(m.sweep_points((workload.params or {}).get("grid") or {})) or 1
    else:
        expected = workload.replicas
    replicas = sorted(set(range(expected)) | {r for r, _ in kept})
    return LogChoices(tuple(replicas), tuple(sorted(a for r, a in kept if r == replica)))


@dataclass(frozen=True)
class ClusterEvents:
    events: list[cluster_reads.ClusterEvent]
    archived: bool = False
    note: str = ""


def _event_from_record(record: Mapping[str, Any]) -> cluster_reads.ClusterEvent:
    time = record.get("time")
    return cluster_reads.ClusterEvent(
        time=datetime.fromisoformat(str(time)) if time else None,
        type=str(record.get("type") or ""),
        reason=str(record.get("reason") or ""),
        message=str(record.get("message") or ""),
        object=str(record.get("object") or ""),
        count=int(record.get("count") or 1),
    )


def workload_cluster_events(*, workload: Workload) -> ClusterEvents:
    """The workload's Kubernetes events: the cluster's while its objects exist, the archived
    ones after. Raises :class:`cluster_reads.LogsUnavailable` (why there are none) and the cluster
    errors of :mod:`apps.orchestration.errors`."""
    if not _objects_exist(workload):
        row = WorkloadArchive.objects.filter(workload=workload).first()
        if row is not None:
            events = [_event_from_record(e) for e in row.events or []]
            return ClusterEvents(events, archived=True, note=row.note)
        if workload.is_terminal and not _ran(workload):
            raise cluster_reads.LogsUnavailable(_never_placed("Kubernetes events"))
        if _ran(workload) and WorkloadLogArchive.objects.filter(workload=workload).exists():
            return ClusterEvents([], archived=True)
        if _ran(workload):
            raise cluster_reads.LogsUnavailable(_nothing_kept(workload, "Kubernetes events"))
    if workload.cluster_id is None and not workload.k8s_objects:
        raise cluster_reads.LogsUnavailable("The workload has not been placed on a cluster yet.")
    return ClusterEvents(cluster_reads.workload_events(workload=workload))


# --- a sweep's trials ------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialRow:
    """One trial of a sweep as the sweep's page and the API show it."""

    id: int
    index: int
    params: dict[str, str]
    # What the trial runs: the sweep's command and arguments, its values in their placeholders.
    command: list[str]
    args: list[str]
    state: str
    exit_code: int | None
    started_at: datetime | None
    finished_at: datetime | None
    runtime_seconds: int | None
    attempts: int
    last_metrics_line: str | None
    # When that line was printed (read from the running pod, or the end of the archived log).
    last_metrics_at: datetime | None
    reason: str


def sweep_trials(sweep: Workload, *, now: datetime | None = None) -> list[TrialRow]:
    """Every trial of ``sweep`` in index order, with its last metrics line: the latest of the
    one read from its running pod (LiveMetrics, kept by ``trial_metrics_pass``) and the one at
    the end of its last archived log. Three queries."""
    now = now or timezone.now()
    trials = list(sweep.trials.order_by("trial_index", "id"))
    latest: dict[int, WorkloadLogArchive] = {}
    for row in WorkloadLogArchive.objects.filter(workload__in=trials).order_by("attempt", "id"):
        latest[row.workload_id] = row  # the last attempt's log wins
    live = {row.workload_id: row for row in LiveMetrics.objects.filter(workload__in=trials)}
    out = []
    for t in trials:
        log = latest.get(t.pk)
        metrics = _latest_metrics(log, live.get(t.pk))
        runtime = None
        if t.started_at is not None:
            runtime = int(((t.finished_at or now) - t.started_at).total_seconds())
        point = (t.params or {}).get("point")
        out.append(
            TrialRow(
                id=t.pk,
                index=t.trial_index or 0,
                params={str(k): str(v) for k, v in (point or {}).items()},
                command=[str(w) for w in t.command or []],
                args=[str(w) for w in t.args or []],
                state=t.state,
                exit_code=t.exit_code,
                started_at=t.started_at,
                finished_at=t.finished_at,
                runtime_seconds=max(0, runtime) if runtime is not None else None,
                attempts=log.attempt if log else (1 if t.started_at else 0),
                last_metrics_line=metrics[0] if metrics else None,
                last_metrics_at=metrics[1] if metrics else None,
                reason=t.last_reason,
            )
        )
    return out


def _latest_metrics(
    log: WorkloadLogArchive | None, live: LiveMetrics | None
) -> tuple[str, datetime | None] | None:
    """The newer of a trial's archived and live metrics lines (and when it was printed)."""
    found: list[tuple[datetime, str]] = []
    if log is not None and (entry := archive.metrics_entry(log.text.splitlines())) is not None:
        found.append((entry[1] or log.archived_at, entry[0]))
    if live is not None and live.line:
        found.append((live.line_at or live.read_at, live.line))
    if not found:
        return None
    at, line = max(found, key=lambda f: f[0])
    return line, at
