"""A workload's objects: created (with the notebook's home volume and token) while it is
live, archived and deleted once it is not, and the names created stored on the workload."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.catalog.resources import ResourceMappingError, device_quota_key
from apps.common import taskqueue
from apps.orchestration import clusters
from apps.orchestration import manifests as m
from apps.orchestration.errors import (
    ClusterRefused,
    ClusterStarting,
    ClusterUnreachable,
)
from apps.orchestration.kube import (
    Applied,
    ForeignObjectError,
    Kube,
)
from apps.orchestration.models import (
    HomeVolume,
)
from apps.orchestration.selectors import (
    GONE_STATES,
    LIVE_STATES,
    cluster_of,
    workload_spec,
)
from apps.orchestration.services.archiving import archive_before_delete
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.selectors import preemption_grace_seconds
from apps.workloads.services import (
    workload_transition,
)

log = logging.getLogger(__name__)


UNREACHABLE_REASON = "cluster unreachable, retrying"
STARTING_REASON = "the cluster is starting; its objects are created once it is up"


# apiVersion and kind of every object a workload may own, for deletion and orphan sweeps.
WORKLOAD_KINDS = (
    ("batch/v1", "Job"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("networking.k8s.io/v1", "Ingress"),
    # Gateway API (TRAFFIC_API=gateway-api): a notebook's or an endpoint's route, and
    # Traefik's forwardAuth beside it. Listed as nothing where the cluster does not serve them.
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("traefik.io/v1alpha1", "Middleware"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("v1", "Secret"),
    # A class allocated through DRA: the claim template its pods name (their claims go with
    # the pods). Listed as nothing on a cluster that does not serve resource.k8s.io/v1.
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
)


API_VERSIONS = {kind: version for version, kind in WORKLOAD_KINDS}


# What a workload of each kind may own (manifests.workload_manifests), swept by label when its
# objects are deleted; a kind not named here may own any of WORKLOAD_KINDS.
OWNED_KINDS = {
    wl.KIND_TRAINING: {"Job", "Service", "NetworkPolicy", "ResourceClaimTemplate"},
    wl.KIND_SWEEP: {"Job", "ResourceClaimTemplate"},
}


def _record_refs(workload: Workload, applied: Iterable[Applied]) -> list[dict[str, str]]:
    refs = list(workload.k8s_objects or [])
    for item in applied:
        ref = item.ref()
        if ref not in refs:
            refs.append(ref)
    return refs


HOME_CLAIM_ATTEMPTS = 20


def home_volume_ensure(*, user_id: int, team: Team) -> str:
    """The name of a person's home volume in a team, chosen and stored on first use.

    Keyed by the user's id; a name already stored for someone else in the team (a volume
    named by the earlier username scheme) is skipped. Two reconciles racing for the same
    person both end with the one stored row (the unique constraints decide).
    """
    for attempt in range(HOME_CLAIM_ATTEMPTS):
        stored = (
            HomeVolume.objects.filter(user_id=user_id, team=team)
            .values_list("claim", flat=True)
            .first()
        )
        if stored:
            return stored
        try:
            with transaction.atomic():
                claim = m.home_claim_name(user_id, attempt)
                HomeVolume.objects.create(user_id=user_id, team=team, claim=claim)
            return claim
        except IntegrityError:
            continue  # taken in this team, or stored for this person meanwhile: read again
    raise m.ManifestError(f"No free home volume name for user {user_id} in {team.namespace}.")


def _ensure_objects(kube: Kube, workload: Workload) -> list[Applied]:
    spec = workload_spec(workload)
    applied: list[Applied] = []
    if workload.kind == wl.KIND_NOTEBOOK:
        claim = home_volume_ensure(user_id=workload.owner_id, team=workload.team)
        spec = replace(spec, home_claim=claim)
        applied.append(
            kube.apply(
                m.home_claim_manifest(
                    namespace=spec.namespace,
                    claim=spec.home_claim,
                    owner_id=workload.owner_id,
                    team_slug=spec.team_slug,
                    size=spec.home_size,
                )
            )
        )
        if kube.get("v1", "Secret", spec.notebook_token_secret, spec.namespace) is None:
            # The token exists only in the cluster; the portal reads it for the owner on demand.
            secret = m.notebook_token_secret(spec=spec, token=secrets.token_urlsafe(32))
            applied.append(kube.apply(secret, workload_id=workload.pk))
        else:
            applied.append(
                Applied("Secret", spec.namespace, spec.notebook_token_secret, False, False)
            )
    applied.extend(kube.apply_all(m.workload_manifests(spec), workload_id=workload.pk))
    # The home volume is not the workload's: it is kept, so it is not recorded for deletion.
    return [a for a in applied if a.kind != "PersistentVolumeClaim"]


def delete_objects(kube: Kube, workload: Workload) -> int:
    deleted = 0
    refs = list(workload.k8s_objects or [])
    # Also sweep by label, in case a worker died between creating and recording a name.
    namespace = workload.team.namespace
    owned = OWNED_KINDS.get(workload.kind)
    for version, kind in WORKLOAD_KINDS:
        if owned is not None and kind not in owned:
            continue
        for obj in kube.list_owned(
            version, kind, namespace=namespace, label_selector=f"{m.LABEL_WORKLOAD}={workload.pk}"
        ):
            ref = {"kind": kind, "namespace": namespace, "name": obj["metadata"]["name"]}
            if ref not in refs:
                refs.append(ref)
    for ref in refs:
        api_version = API_VERSIONS.get(ref["kind"])
        if api_version is None:
            continue
        try:
            if kube.delete(
                api_version, ref["kind"], ref["name"], ref["namespace"], workload_id=workload.pk
            ):
                deleted += 1
        except ForeignObjectError as exc:
            log.warning("%s", exc)
    return deleted


def _fail_unstartable(kube: Kube, workload: Workload, exc: Exception) -> str:
    """A record the API server rejects (or a foreign object in the way) fails this workload
    with the server's words; it never blocks the others. Ending it releases its quota; what
    it got before the refusal is removed at once."""
    failed = workload_transition(
        workload=workload,
        to_state=wl.FAILED,
        reason=f"cannot be started: {exc}",
        expected_from=workload.state,
    )
    try:
        delete_objects(kube, workload)
    except ClusterRefused as cleanup:
        log.warning("workload %s: cleanup refused: %s", workload.pk, cleanup)
    if failed:
        taskqueue.SCHEDULING_CYCLE.send()  # its GPUs are free for the queue
    return "failed"


def _record_ensured(workload: Workload, cluster: Cluster, applied: list[Applied]) -> None:
    """Store the names created (and the cluster, on first placement); an admitted workload
    is starting now."""
    with transaction.atomic():
        changes: dict[str, Any] = {"k8s_objects": _record_refs(workload, applied)}
        if workload.cluster_id is None:
            changes["cluster"] = cluster
        Workload.objects.filter(pk=workload.pk).update(**changes)
        if workload.last_reason in (UNREACHABLE_REASON, STARTING_REASON):
            Workload.objects.filter(pk=workload.pk).update(last_reason="cluster reachable again")
        if workload.state == wl.ADMITTED:
            workload_transition(
                workload=workload,
                to_state=wl.STARTING,
                reason="Kubernetes objects created; waiting for the pods.",
                expected_from=wl.ADMITTED,
            )


# An admission made by preemption waits for its victims' pods at most this long past the longest
# grace period: a pod stuck terminating (its node lost) does not hold it back for ever.
VICTIM_WAIT_MARGIN_SECONDS = 60


def _quantity(value: Any) -> int | None:
    """An extended resource's count (a whole number), or None for any other quantity."""
    try:
        return int(str(value))
    except ValueError:
        return None


def _pod_requests(manifests: Iterable[dict[str, Any]]) -> dict[str, int]:
    """The ResourceQuota keys (``requests.nvidia.com/gpu``, …) a workload's pods ask for in
    all, counted for extended resources (whole numbers; CPU and memory are left out), and the
    devices their claims request per device class (one claim per pod from the workload's
    ResourceClaimTemplate)."""
    need: dict[str, int] = {}
    per_claim: dict[str, int] = {}
    all_pods = 0
    for obj in manifests:
        spec = obj.get("spec") or {}
        if obj.get("kind") == "ResourceClaimTemplate":
            for request in ((spec.get("spec") or {}).get("devices") or {}).get("requests") or []:
                exactly = request.get("exactly") or {}
                key = device_quota_key(str(exactly.get("deviceClassName", "")))
                per_claim[key] = per_claim.get(key, 0) + int(exactly.get("count") or 1)
            continue
        template = (spec.get("template") or {}).get("spec")
        if obj.get("kind") not in ("Job", "StatefulSet", "Deployment") or not template:
            continue
        pods = spec.get("parallelism") or spec.get("replicas") or 1
        all_pods += int(pods)
        for container in template.get("containers") or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            for name, value in limits.items():
                count = _quantity(value)
                if "/" in name and count:
                    key = f"requests.{name}"
                    need[key] = need.get(key, 0) + count * int(pods)
    for key, devices in per_claim.items():
        need[key] = need.get(key, 0) + devices * all_pods
    return need


def waiting_for_victims(kube: Kube, workload: Workload) -> str | None:
    """Why an admission made by preemption does not start yet, or None when it may.

    The scheduler admits a workload onto what its victims held at once (the capacity is its
    own from then on), but their pods terminate through their grace period, holding their GPUs
    and counting against their namespaces' ResourceQuota. Creating its objects before that
    would be refused ("exceeded quota"), so they are created only once the victims' pods are
    gone and its namespace's quota shows room for its pods."""
    placement = workload.placement if isinstance(workload.placement, dict) else {}
    victims = sorted({int(v) for v in placement.get("waits_for") or [] if str(v).isdigit()})
    if workload.state != wl.ADMITTED or not victims:
        return None
    waited = (timezone.now() - (workload.admitted_at or timezone.now())).total_seconds()
    if waited > max(preemption_grace_seconds().values()) + VICTIM_WAIT_MARGIN_SECONDS:
        return None
    namespaces = set(
        Workload.objects.filter(pk__in=victims).values_list("team__namespace", flat=True)
    )
    selector = f"{m.LABEL_WORKLOAD} in ({','.join(str(v) for v in victims)})"
    left = sum(
        len(kube.list_owned("v1", "Pod", namespace=ns, label_selector=selector))
        for ns in sorted(namespaces)
    )
    if left:
        return (
            f"Admitted; waiting for {left} pod(s) of the {len(victims)} workload(s) preempted "
            "for it to end their grace period and release their GPUs."
        )
    need = _pod_requests(m.workload_manifests(workload_spec(workload)))
    quota = kube.get("v1", "ResourceQuota", m.QUOTA_NAME, workload.team.namespace) or {}
    status = quota.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    for key, count in sorted(need.items()):
        limit, now_used = _quantity(hard.get(key, "")), _quantity(used.get(key, "0"))
        if limit is not None and now_used is not None and now_used + count > limit:
            return (
                f"Admitted; waiting for the cluster to release the GPUs of the workload(s) "
                f"preempted for it ({key}: {now_used} of {limit} in use, {count} needed)."
            )
    return None


def workload_reconcile(*, workload_id: int) -> str:
    """Make the cluster match one workload's state. Safe to run twice or concurrently."""
    workload = (
        Workload.objects.select_related("team", "owner", "gpu_class", "image", "cluster")
        .filter(pk=workload_id)
        .first()
    )
    if workload is None:
        return "gone"
    cluster = cluster_of(workload)
    if cluster is None:
        return "no cluster"
    try:
        kube = clusters.kube_for(cluster)
        if workload.state in LIVE_STATES:
            try:
                waiting = waiting_for_victims(kube, workload)
                if waiting is not None:
                    Workload.objects.filter(pk=workload.pk).update(last_reason=waiting[:500])
                    return "waiting"
                applied = _ensure_objects(kube, workload)
            except (ResourceMappingError, m.ManifestError, ValueError, ClusterRefused) as exc:
                return _fail_unstartable(kube, workload, exc)
            _record_ensured(workload, cluster, applied)
            return "ensured"
        if workload.state in GONE_STATES or workload.state == wl.PENDING:
            if not workload.k8s_objects and workload.state == wl.PENDING:
                return "nothing"
            # Logs and events outlive the objects: kept first, deleted after.
            if not archive_before_delete(kube, workload):
                return "archiving"
            delete_objects(kube, workload)
            Workload.objects.filter(pk=workload.pk).update(k8s_objects=[])
            return "deleted"
    except ClusterUnreachable as exc:
        reason = STARTING_REASON if isinstance(exc, ClusterStarting) else UNREACHABLE_REASON
        if workload.last_reason != reason:
            # Said once: the retries that follow (until the cluster answers) stay quiet.
            log.warning("workload %s: %s", workload_id, exc)
        Workload.objects.filter(pk=workload.pk).update(last_reason=reason)
        raise
    return "nothing"
