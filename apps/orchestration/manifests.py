"""Kubernetes objects for teams and workloads, built as plain dicts. Pure: no API calls.

Every object carries the managed-by label and, for workloads, the workload id, so the
reconciler can find what it owns and never touches anything else.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from apps.catalog import core as catalog_core
from apps.catalog.resources import GpuClassSpec
from apps.workloads import core as wl

Manifest = dict[str, Any]

MANAGED_BY = "gpupaas"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_WORKLOAD = "gpupaas.io/workload-id"
LABEL_TEAM = "gpupaas.io/team"
LABEL_KIND = "gpupaas.io/kind"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_SWEEP_POINT = "gpupaas.io/sweep-point"
# A person is named in the cluster by their user id only: a username is not a label value
# ("eve.", "josé") and two usernames may fold to one slug ("eve" and "Eve").
LABEL_OWNER_ID = "gpupaas.io/owner-id"
LABEL_SECRET_SCOPE = "gpupaas.io/secret-scope"  # noqa: S105 - a label name
ANNOTATION_HAMI_UUID = "nvidia.com/use-gpuuuid"

SERVICE_ACCOUNT = "gpupaas-workload"
QUOTA_NAME = "gpupaas-quota"
LIMIT_RANGE_NAME = "gpupaas-defaults"

# Values keep DESIGN.md's order; batch never preempts anyone, the others preempt lower classes.
PRIORITY_VALUES = {
    wl.PRIORITY_PRODUCTION: 1_000_000,
    wl.PRIORITY_TRAINING: 100_000,
    wl.PRIORITY_DEVELOPMENT: 10_000,
    wl.PRIORITY_BATCH: 1_000,
}
PRIORITY_DESCRIPTIONS = {
    wl.PRIORITY_PRODUCTION: "gpupaas production: inference on live traffic; never preempted.",
    wl.PRIORITY_TRAINING: "gpupaas training: active training runs; preempted only by production.",
    wl.PRIORITY_DEVELOPMENT: "gpupaas development: notebooks; preempted by training, production.",
    wl.PRIORITY_BATCH: "gpupaas batch: sweeps on idle GPUs; preempted by any higher class.",
}
# Where a job's checkpoint and output directories live: the team's shared volume.
TEAM_MOUNT = "/team"
# The team's shared ReadWriteMany volume claim in its namespace (team_claim_name).
TEAM_CLAIM = "team-data"
# Where a registered dataset is mounted read-only: DATASETS_MOUNT/<name>.
DATASETS_MOUNT = "/datasets"
NOTEBOOK_PORT = 8888
RENDEZVOUS_PORT = 29500


def priority_class_name(priority: str) -> str:
    return f"gpupaas-{priority}"


def _meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {LABEL_MANAGED_BY: MANAGED_BY, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


# --- cluster-wide and per team ----------------------------------------------------------------


def priority_class_manifests() -> list[Manifest]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": _meta(priority_class_name(priority)),
            "value": value,
            "globalDefault": False,
            "preemptionPolicy": "Never"
            if priority == wl.PRIORITY_BATCH
            else "PreemptLowerPriority",
            "description": PRIORITY_DESCRIPTIONS[priority],
        }
        for priority, value in PRIORITY_VALUES.items()
    ]


@dataclass(frozen=True)
class TeamQuotaSpec:
    gpu_class: GpuClassSpec
    limit_milli: int


@dataclass(frozen=True)
class TeamSpec:
    slug: str
    namespace: str
    quotas: tuple[TeamQuotaSpec, ...] = ()
    ingress_namespace: str = "ingress-nginx"
    # Object counts the namespace may hold (``count/pods`` → 1000): what a team can store
    # in the cluster's database is bounded whatever its GPU quota.
    object_counts: Mapping[str, int] = field(default_factory=dict)
    # The shared volume (empty size: none) and what all the team's claims may request.
    volume_size: str = ""
    volume_storage_class: str = ""
    storage_quota: str = ""
    # The portal's own identity on the cluster (``namespace/name`` of its ServiceAccount) and
    # the ClusterRole it holds in team namespaces (the Helm chart's ``-team`` role): with
    # both set, each team namespace gets a RoleBinding granting that role there, and nowhere
    # else. Empty: the portal runs with a kubeconfig that already may do everything.
    portal_service_account: str = ""
    portal_team_role: str = ""


PORTAL_ROLE_BINDING = "gpupaas-portal"


def portal_role_binding_manifest(team: TeamSpec) -> list[Manifest]:
    """The RoleBinding that lets the portal manage the team's namespace, if it runs least
    privileged (see TeamSpec.portal_service_account)."""
    if not (team.portal_service_account and team.portal_team_role):
        return []
    sa_namespace, _, sa_name = team.portal_service_account.partition("/")
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(PORTAL_ROLE_BINDING, team.namespace, **{LABEL_TEAM: team.slug}),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": team.portal_team_role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}],
        }
    ]


def team_claim_name() -> str:
    """The name of every team's shared volume claim: the one place it is named."""
    return TEAM_CLAIM


def team_volume_manifest(team: TeamSpec) -> Manifest:
    """The team's shared ReadWriteMany volume, mounted at TEAM_MOUNT in notebooks and jobs.
    Not labelled with a workload: it outlives them all."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": team.volume_size}},
    }
    if team.volume_storage_class:
        spec["storageClassName"] = team.volume_storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(team_claim_name(), team.namespace, **{LABEL_TEAM: team.slug}),
        "spec": spec,
    }


def storage_hard(team: TeamSpec) -> dict[str, str]:
    """The storage every claim of the namespace may request together."""
    return {"requests.storage": team.storage_quota} if team.storage_quota else {}


def quota_hard(quotas: Sequence[TeamQuotaSpec]) -> dict[str, str]:
    """The team's limits per GPU resource, so Kubernetes enforces the ceiling a second time.

    Classes that share a resource name add up. A MIG class caps each profile at the number
    of instances the limit could buy; a HAMi class caps both vGPUs and their memory.
    """
    hard: dict[str, int] = {}

    def add(resource: str, amount: int) -> None:
        hard[f"requests.{resource}"] = hard.get(f"requests.{resource}", 0) + amount

    for quota in quotas:
        gpu, limit = quota.gpu_class, quota.limit_milli
        if gpu.sharing_mode == catalog_core.SHARING_WHOLE:
            add("nvidia.com/gpu", limit // 1000)
        elif gpu.sharing_mode == catalog_core.SHARING_TIMESLICE:
            add("nvidia.com/gpu.shared", limit * (gpu.timeslice_replicas or 1) // 1000)
        elif gpu.sharing_mode == catalog_core.SHARING_MIG:
            for profile in gpu.mig_profiles:
                memory = catalog_core.mig_profile_memory_mib(profile) or gpu.memory_mib
                per_instance_milli = max(1, math.ceil(memory * 1000 / gpu.memory_mib))
                add(f"nvidia.com/mig-{profile}", limit // per_instance_milli)
        elif gpu.sharing_mode == catalog_core.SHARING_HAMI:
            add("nvidia.com/gpu", limit * (gpu.hami_split_count or 1) // 1000)
            add("nvidia.com/gpumem", limit * gpu.memory_mib // 1000)
    return {k: str(v) for k, v in sorted(hard.items())}


def canonical_count(value: int) -> str:
    """A whole number as the API server writes it back (1000 → "1k"), so that a quota we
    set reads back equal and is not replaced on every pass."""
    for suffix, exponent in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if value and value % 10**exponent == 0:
            return f"{value // 10**exponent}{suffix}"
    return str(value)


def object_count_hard(counts: Mapping[str, int]) -> dict[str, str]:
    """Object-count limits as ResourceQuota keys (``count/jobs.batch``, ``count/pods``, …)."""
    return {key: canonical_count(int(value)) for key, value in sorted(counts.items())}


def team_manifests(team: TeamSpec) -> list[Manifest]:
    """Everything a team namespace needs, in the order it should be applied."""
    ns = team.namespace
    team_label = {LABEL_TEAM: team.slug}
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "labels": {
                    LABEL_MANAGED_BY: MANAGED_BY,
                    LABEL_TEAM: team.slug,
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                    "pod-security.kubernetes.io/warn": "restricted",
                    "pod-security.kubernetes.io/audit": "restricted",
                },
            },
        },
        # Before everything else in the namespace: without it a least-privileged portal may
        # create nothing there.
        *portal_role_binding_manifest(team),
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(SERVICE_ACCOUNT, ns, **team_label),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta(QUOTA_NAME, ns, **team_label),
            "spec": {
                "hard": {
                    **quota_hard(team.quotas),
                    **object_count_hard(team.object_counts),
                    **storage_hard(team),
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": _meta(LIMIT_RANGE_NAME, ns, **team_label),
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"cpu": "1", "memory": "2Gi"},
                        "defaultRequest": {"cpu": "250m", "memory": "512Mi"},
                    }
                ]
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("default-deny", ns, **team_label),
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("allow-dns", ns, **team_label),
            "spec": {
                "podSelector": {},
                "policyTypes": ["Egress"],
                "egress": [
                    {
                        "to": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                                },
                                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                            }
                        ],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
                    }
                ],
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("allow-notebook-ingress", ns, **team_label),
            "spec": {
                "podSelector": {"matchLabels": {LABEL_KIND: wl.KIND_NOTEBOOK}},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {
                                        "kubernetes.io/metadata.name": team.ingress_namespace
                                    }
                                }
                            }
                        ],
                        "ports": [{"protocol": "TCP", "port": NOTEBOOK_PORT}],
                    }
                ],
            },
        },
        # After the quota, which counts it.
        *([team_volume_manifest(team)] if team.volume_size else []),
    ]


# --- workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SecretEnv:
    """A request's reference to a team or personal secret, resolved at submit: ``secret`` is
    the Kubernetes name stored when the secret was created. ``env`` set: that variable takes
    ``key``; empty: every key of the secret becomes a variable (envFrom)."""

    secret: str
    env: str = ""
    key: str = ""


@dataclass(frozen=True)
class DatasetMount:
    """A registered dataset a request names, as recorded at submit: a volume claim of the team
    namespace (``claim``), mounted read-only at DATASETS_MOUNT/<name>; or an object-store
    prefix (``uri``) handed to the pod in its environment, with the keys of a named secret."""

    name: str
    claim: str = ""
    uri: str = ""
    secret: str = ""  # the stored Kubernetes name of the secret
    secret_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class EndpointShape:
    """What an inference endpoint's objects state besides a workload's fields."""

    port: int
    health_path: str
    model_path: str = ""
    model_uri: str = ""
    model_secret: str = ""  # the stored Kubernetes name of the object-store secret
    model_secret_keys: tuple[str, ...] = ()
    revision: int = 1
    progress_deadline_seconds: int = 600
    # A new replica counts as available (and lets an old one go) only after it has stayed
    # ready this long: a server that crashes right after its first good probe is not rolled out.
    min_ready_seconds: int = 10
    # Served through the ingress on ``host`` under endpoint_path(), each call authorised by
    # the portal (``auth_url``); no host: no Ingress, the Service only.
    host: str = ""
    auth_url: str = ""
    tls_secret: str = ""
    ingress_namespace: str = "ingress-nginx"


@dataclass(frozen=True)
class ReplicaPlacement:
    node: str
    gpu_uuids: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload as the builders need it; services fill it from the database."""

    id: int
    name: str
    kind: str
    team_slug: str
    namespace: str
    owner: str
    image: str
    gpu_limits: Mapping[str, str]
    gpu_product: str
    sharing_mode: str
    priority_class: str
    replicas: int = 1
    gpus_per_replica: int = 1
    cpu_milli: int = 2000
    memory_mib: int = 8192
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: tuple[SecretEnv, ...] = ()
    read_only_root: bool = False
    max_runtime_seconds: int | None = None
    retries: int = 0
    placement: tuple[ReplicaPlacement, ...] = ()
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    sweep_grid: Mapping[str, Sequence[str]] = field(default_factory=dict)
    # A trial of a sweep (a one-point grid): its index in the sweep, what SWEEP_INDEX says.
    sweep_index: int = 0
    notebook_base_url: str = ""
    notebook_host: str = ""
    # The portal's auth endpoint as the ingress controller reaches it, and its sign-in page as
    # the browser does: every request to the notebook is authorised by the portal.
    notebook_auth_url: str = ""
    notebook_signin_url: str = ""
    notebook_tls_secret: str = ""
    home_claim: str = ""
    home_size: str = "20Gi"
    # Seconds a preempted pod gets to checkpoint (as configured; the scheduler waits as long).
    # None: the class's default.
    grace_seconds: int | None = None
    # Earlier starts of this workload that ended in a requeue (preemption, gang restart).
    restart_count: int = 0
    team_claim: str = TEAM_CLAIM
    datasets: tuple[DatasetMount, ...] = ()
    endpoint: EndpointShape | None = None

    @property
    def base_name(self) -> str:
        return f"wl-{self.id}"

    @property
    def notebook_token_secret(self) -> str:
        """The name of a notebook's token Secret. Readers take it from the names stored on
        the workload when the Secret was created, never from here."""
        return f"{self.base_name}-token"

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_WORKLOAD: str(self.id),
            LABEL_TEAM: self.team_slug,
            LABEL_KIND: self.kind,
        }


def _pod_security() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _container_security(read_only_root: bool) -> dict[str, Any]:
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": read_only_root,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _resources(spec: WorkloadSpec) -> dict[str, Any]:
    amounts = {"cpu": f"{spec.cpu_milli}m", "memory": f"{spec.memory_mib}Mi", **spec.gpu_limits}
    # Extended resources need requests equal to limits; CPU and memory are Guaranteed too.
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": str(v)} for k, v in sorted(values.items())]


def _secret_env(refs: Sequence[SecretEnv]) -> list[dict[str, Any]]:
    """Variables that take a secret's key: the value stays in the Secret, never the manifest."""
    return [
        {"name": r.env, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}}
        for r in refs
        if r.env
    ]


class ManifestError(ValueError):
    """A workload whose objects cannot state what the scheduler decided (e.g. a gang placed
    on fewer nodes than it has replicas)."""


def is_gang(spec: WorkloadSpec) -> bool:
    """A multi-node training job: one pod per replica, each on its own node, all together."""
    return spec.kind == wl.KIND_TRAINING and spec.replicas > 1


def _affinity(spec: WorkloadSpec, nodes: Sequence[str]) -> dict[str, Any]:
    """The pod may land only on a node the scheduler chose, and a gang's pods on distinct ones.

    One node selector term per chosen node (terms are ORed; a ``metadata.name`` field
    selector takes exactly one value). With the gang's required anti-affinity on hostname,
    the cluster's scheduler has exactly one assignment: one replica on each chosen node.
    """

    def product() -> list[dict[str, Any]]:
        return [{"key": "nvidia.com/gpu.product", "operator": "In", "values": [spec.gpu_product]}]

    terms: list[dict[str, Any]] = [
        {
            "matchExpressions": product(),
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}],
        }
        for node in sorted(set(nodes))
    ] or [{"matchExpressions": product()}]
    affinity: dict[str, Any] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    }
    if is_gang(spec):
        # One replica per node, as the scheduler placed them.
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    return affinity


def _pod_annotations(spec: WorkloadSpec, placements: Sequence[ReplicaPlacement]) -> dict[str, str]:
    annotations = dict(spec.pod_annotations)
    uuids = [u for p in placements for u in p.gpu_uuids]
    if spec.sharing_mode == catalog_core.SHARING_HAMI and uuids:
        annotations[ANNOTATION_HAMI_UUID] = ",".join(uuids)
    return annotations


def _pod_spec(
    spec: WorkloadSpec,
    container: dict[str, Any],
    placements: Sequence[ReplicaPlacement],
    *,
    restart_policy: str,
    volumes: list[dict[str, Any]] | None = None,
    subdomain: str | None = None,
) -> dict[str, Any]:
    volumes = list(volumes or [])
    if spec.read_only_root:
        volumes.append({"name": "tmp", "emptyDir": {}})
        tmp_mount = {"name": "tmp", "mountPath": "/tmp"}  # noqa: S108 - a private emptyDir
        container.setdefault("volumeMounts", []).append(tmp_mount)
    pod: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "priorityClassName": priority_class_name(spec.priority_class),
        "terminationGracePeriodSeconds": grace_seconds(spec),
        "restartPolicy": restart_policy,
        "securityContext": _pod_security(),
        "affinity": _affinity(spec, [p.node for p in placements]),
        "containers": [container],
    }
    if volumes:
        pod["volumes"] = volumes
    if subdomain:
        pod["subdomain"] = subdomain
    return pod


def grace_seconds(spec: WorkloadSpec) -> int:
    """The pod's terminationGracePeriodSeconds: the grace the scheduler waits for."""
    if spec.grace_seconds is not None:
        return spec.grace_seconds
    return wl.grace_seconds_for(spec.priority_class)


def job_data_dirs(spec: WorkloadSpec, point: int | None = None) -> dict[str, str]:
    """GPUPAAS_CHECKPOINT_DIR and GPUPAAS_OUTPUT_DIR of a job (per point of a sweep): the same
    on every start of the workload, so a requeued job resumes from its checkpoint. The one
    place these paths are named."""
    suffix = f"{spec.base_name}" + (f"/point-{point}" if point is not None else "")
    return {
        "GPUPAAS_CHECKPOINT_DIR": f"{TEAM_MOUNT}/checkpoints/{suffix}",
        "GPUPAAS_OUTPUT_DIR": f"{TEAM_MOUNT}/outputs/{suffix}",
    }


def _job_env(
    spec: WorkloadSpec, env: Mapping[str, str], point: int | None = None
) -> dict[str, str]:
    """The user's environment plus what the platform tells every job (the platform's wins)."""
    return {
        **env,
        **job_data_dirs(spec, point),
        "GPUPAAS_RESTART_COUNT": str(spec.restart_count),
    }


def _env_suffix(name: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name.upper())


def dataset_env_prefix(name: str) -> str:
    """GPUPAAS_DATASET_<NAME>_: the variables of an object-store dataset."""
    return f"GPUPAAS_DATASET_{_env_suffix(name)}_"


def _dataset_env(datasets: Sequence[DatasetMount]) -> list[dict[str, Any]]:
    """An object-store dataset's prefix and, from its secret, each key (by reference: the
    values stay in the Secret). No CSI or FUSE mount of the store is made."""
    env: list[dict[str, Any]] = []
    for d in datasets:
        if not d.uri:
            continue
        prefix = dataset_env_prefix(d.name)
        env.append({"name": f"{prefix}URI", "value": d.uri})
        if d.secret:
            env.extend(
                {
                    "name": prefix + _env_suffix(key),
                    "valueFrom": {"secretKeyRef": {"name": d.secret, "key": key}},
                }
                for key in d.secret_keys
            )
    return env


def _team_volume(spec: WorkloadSpec, container: dict[str, Any]) -> list[dict[str, Any]]:
    """Mount the team's shared volume at TEAM_MOUNT (where the data paths of job_data_dirs
    live) and each claim dataset read-only at DATASETS_MOUNT/<name>."""
    mounts = container.setdefault("volumeMounts", [])
    mounts.append({"name": "team", "mountPath": TEAM_MOUNT})
    volumes: list[dict[str, Any]] = [
        {"name": "team", "persistentVolumeClaim": {"claimName": spec.team_claim}}
    ]
    for d in spec.datasets:
        if not d.claim:
            continue
        volume = f"dataset-{d.name}"
        mounts.append({"name": volume, "mountPath": f"{DATASETS_MOUNT}/{d.name}", "readOnly": True})
        volumes.append(
            {"name": volume, "persistentVolumeClaim": {"claimName": d.claim, "readOnly": True}}
        )
    container["env"].extend(_dataset_env(spec.datasets))
    return volumes


def _container(spec: WorkloadSpec, name: str, env: Mapping[str, str]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "resources": _resources(spec),
        "securityContext": _container_security(spec.read_only_root),
        "env": [*_env(env), *_secret_env(spec.secret_env)],
    }
    env_from = [{"secretRef": {"name": s.secret}} for s in spec.secret_env if not s.env]
    if env_from:
        container["envFrom"] = env_from
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    return container


def _job(
    spec: WorkloadSpec,
    name: str,
    labels: dict[str, str],
    pod_spec: dict[str, Any],
    annotations: dict[str, str],
    *,
    completions: int = 1,
    indexed: bool = False,
) -> Manifest:
    if is_gang(spec):
        # A gang lives and dies whole: a replica that fails or is disrupted fails the Job at
        # once, so its peers stop instead of waiting on a rendezvous that never completes
        # (the Job would replace that one pod alone). The platform then restarts the whole
        # gang (status.py): back in the queue, admitted again together; retries count there.
        backoff_limit = 0
        rules: list[dict[str, Any]] = [
            {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {
                "action": "FailJob",
                "onExitCodes": {"containerName": "main", "operator": "NotIn", "values": [0]},
            },
        ]
    else:
        # A preempted or evicted pod is the platform's doing, not the job's failure.
        backoff_limit = spec.retries
        rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    job_spec: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "completions": completions,
        "parallelism": completions,
        "podFailurePolicy": {"rules": rules},
        "template": {
            "metadata": {"labels": labels, **({"annotations": annotations} if annotations else {})},
            "spec": pod_spec,
        },
    }
    if indexed:
        job_spec["completionMode"] = "Indexed"
    if spec.max_runtime_seconds:
        job_spec["activeDeadlineSeconds"] = spec.max_runtime_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": job_spec,
    }


def training_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """A batch/v1 Job; several replicas become an Indexed Job with a headless Service and
    torchrun-style rendezvous environment."""
    name = spec.base_name
    labels = spec.labels
    annotations = _pod_annotations(spec, spec.placement)
    env = _job_env(spec, spec.env)
    if spec.replicas == 1:
        container = _container(spec, "main", env)
        volumes = _team_volume(spec, container)
        pod = _pod_spec(spec, container, spec.placement, restart_policy="Never", volumes=volumes)
        return [_job(spec, name, labels, pod, annotations)]
    nodes = {p.node for p in spec.placement}
    if spec.placement and len(nodes) < spec.replicas:
        raise ManifestError(
            f"{spec.replicas} replicas must run on {spec.replicas} different nodes, but the "
            f"placement names {len(nodes)} ({', '.join(sorted(nodes))})."
        )
    # torchrun-style rendezvous: pod 0 of the Indexed Job is the master, reached by its
    # stable name <job>-0 under the headless Service that is the pods' subdomain. PET_* are
    # the same values under the names torchrun reads for its own options.
    rendezvous = {
        "MASTER_ADDR": f"{name}-0.{name}",
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "NNODES": str(spec.replicas),
        "NPROC_PER_NODE": str(spec.gpus_per_replica),
    }
    env.update(rendezvous)
    env.update({f"PET_{k}": v for k, v in rendezvous.items()})
    env["WORLD_SIZE"] = str(spec.replicas * spec.gpus_per_replica)
    container = _container(spec, "main", env)
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    container["env"].extend(
        {"name": rank, "valueFrom": {"fieldRef": {"fieldPath": index}}}
        for rank in ("NODE_RANK", "PET_NODE_RANK")
    )
    container["ports"] = [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}]
    volumes = _team_volume(spec, container)
    pod = _pod_spec(
        spec, container, spec.placement, restart_policy="Never", volumes=volumes, subdomain=name
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_WORKLOAD: str(spec.id)},
            "ports": [{"name": "rendezvous", "port": RENDEZVOUS_PORT}],
        },
    }
    peers = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-peers", "namespace": spec.namespace, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}}}]}
            ],
            "egress": [{"to": [{"podSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}}}]}],
        },
    }
    job = _job(spec, name, labels, pod, annotations, completions=spec.replicas, indexed=True)
    return [service, peers, job]


# The order of a grid's points (trial i runs point i) has one home.
sweep_points = wl.sweep_points


def _env_key(param: str) -> str:
    # ASCII only, whatever reached the database: "ñ".upper() is alphanumeric, and no valid
    # environment key (the rules accept ASCII identifiers only).
    return "SWEEP_" + "".join(c if c.isascii() and c.isalnum() else "_" for c in param.upper())


def sweep_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """One batch-class Job per point of the grid; each point sees its values as SWEEP_<NAME>."""
    manifests = []
    for index, point in enumerate(sweep_points(spec.sweep_grid)):
        placement = spec.placement[index : index + 1]
        labels = {**spec.labels, LABEL_SWEEP_POINT: str(index)}
        env = {
            **spec.env,
            "SWEEP_INDEX": str(spec.sweep_index + index),
            **{_env_key(k): v for k, v in point.items()},
        }
        point_spec = _with(spec, replicas=1)
        container = _container(point_spec, "main", _job_env(spec, env, index))
        volumes = _team_volume(spec, container)
        pod = _pod_spec(point_spec, container, placement, restart_policy="Never", volumes=volumes)
        manifests.append(
            _job(
                point_spec,
                f"{spec.base_name}-{index}",
                labels,
                pod,
                _pod_annotations(spec, placement),
            )
        )
    return manifests


def _with(spec: WorkloadSpec, **changes: Any) -> WorkloadSpec:
    from dataclasses import replace

    return replace(spec, **changes)


INGRESS_AUTH_URL = "nginx.ingress.kubernetes.io/auth-url"
INGRESS_AUTH_SIGNIN = "nginx.ingress.kubernetes.io/auth-signin"
INGRESS_AUTH_RESPONSE_HEADERS = "nginx.ingress.kubernetes.io/auth-response-headers"
INGRESS_AUTH_METHOD = "nginx.ingress.kubernetes.io/auth-method"


def notebook_ingress_annotations(spec: WorkloadSpec) -> dict[str, str]:
    """ingress-nginx asks the portal about every request (auth-url): 2xx lets it through with
    the Jupyter token the portal answers in ``Authorization`` (so no browser ever holds it),
    401 sends the browser to the portal's sign-in (auth-signin), anything else refuses."""
    if not spec.notebook_auth_url:
        return {}
    annotations = {
        INGRESS_AUTH_URL: spec.notebook_auth_url,
        # The check reads only; without this nginx would ask with the request's own method.
        INGRESS_AUTH_METHOD: "GET",
        INGRESS_AUTH_RESPONSE_HEADERS: "Authorization",
    }
    if spec.notebook_signin_url:
        annotations[INGRESS_AUTH_SIGNIN] = spec.notebook_signin_url
    return annotations


def notebook_path(namespace: str, workload_id: int) -> str:
    """Where a notebook is served on the notebook host: its Ingress path and Jupyter's base URL."""
    return f"/notebooks/{namespace}/{workload_id}/"


def notebook_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """JupyterLab as a StatefulSet of one, the user's home volume, a Service and an Ingress.

    The Jupyter token lives in a Secret created by the service (never in the image, the
    manifest or the logs); the pod reads it from the environment.
    """
    name = spec.base_name
    labels = spec.labels
    base_url = spec.notebook_base_url or notebook_path(spec.namespace, spec.id)
    container = _container(spec, "notebook", spec.env)
    container["env"].append(
        {
            "name": "JUPYTER_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": spec.notebook_token_secret, "key": "token"}},
        }
    )
    if not spec.command:
        container["command"] = ["start-notebook.py"]
        container["args"] = [
            f"--ServerApp.base_url={base_url}",
            "--ServerApp.ip=0.0.0.0",
            f"--ServerApp.port={NOTEBOOK_PORT}",
        ]
    container["ports"] = [{"name": "http", "containerPort": NOTEBOOK_PORT}]
    container["volumeMounts"] = [{"name": "home", "mountPath": "/home/jovyan/work"}]
    data_volumes = _team_volume(spec, container)
    container["readinessProbe"] = {
        "httpGet": {"path": f"{base_url}api", "port": NOTEBOOK_PORT},
        "periodSeconds": 5,
    }
    pod = _pod_spec(
        spec,
        container,
        spec.placement,
        restart_policy="Always",
        volumes=[
            {"name": "home", "persistentVolumeClaim": {"claimName": spec.home_claim}},
            *data_volumes,
        ],
    )
    annotations = _pod_annotations(spec, spec.placement)
    statefulset = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "template": {
                "metadata": {
                    "labels": labels,
                    **({"annotations": annotations} if annotations else {}),
                },
                "spec": pod,
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "selector": {LABEL_WORKLOAD: str(spec.id)},
            "ports": [{"name": "http", "port": 80, "targetPort": NOTEBOOK_PORT}],
        },
    }
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": base_url,
                    "pathType": "Prefix",
                    "backend": {"service": {"name": name, "port": {"number": 80}}},
                }
            ]
        }
    }
    if spec.notebook_host:
        rule["host"] = spec.notebook_host
    ingress_spec: dict[str, Any] = {"rules": [rule]}
    if spec.notebook_tls_secret and spec.notebook_host:
        ingress_spec["tls"] = [
            {"hosts": [spec.notebook_host], "secretName": spec.notebook_tls_secret}
        ]
    metadata: dict[str, Any] = {"name": name, "namespace": spec.namespace, "labels": labels}
    ingress_annotations = notebook_ingress_annotations(spec)
    if ingress_annotations:
        metadata["annotations"] = ingress_annotations
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": ingress_spec,
    }
    return [statefulset, service, ingress]


def home_claim_name(user_id: int, attempt: int = 0) -> str:
    """The home volume name for a person who has none yet: keyed by the user's id, which no
    two people share (a username folded to a slug is not). ``attempt`` picks another when
    the first is taken by a volume named before (``home-u7`` was also the slug of "U7")."""
    return f"home-u{user_id}" if attempt == 0 else f"home-u{user_id}-{attempt}"


def home_claim_manifest(
    *, namespace: str, claim: str, owner_id: int, team_slug: str, size: str
) -> Manifest:
    """The user's home volume in the team namespace. Not labelled with a workload: it outlives
    every notebook (suspend, resume, a new notebook next week). The claim's name is the one
    stored for the person and team (never derived from the username); the owner is labelled
    by user id."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim,
            "namespace": namespace,
            "labels": {
                LABEL_MANAGED_BY: MANAGED_BY,
                LABEL_TEAM: team_slug,
                LABEL_OWNER_ID: str(owner_id),
            },
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def notebook_token_secret(*, spec: WorkloadSpec, token: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": spec.notebook_token_secret,
            "namespace": spec.namespace,
            "labels": spec.labels,
        },
        "type": "Opaque",
        "stringData": {"token": token},
    }


def credential_secret_manifest(
    *, namespace: str, name: str, team_slug: str, personal: bool, data: Mapping[str, str]
) -> Manifest:
    """A team or personal credential: a Secret in the team namespace under its stored name.
    Not labelled with a workload: it outlives them, and the reconciler's sweeps leave it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(
            name,
            namespace,
            **{LABEL_TEAM: team_slug, LABEL_SECRET_SCOPE: "personal" if personal else "team"},
        ),
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode("ascii") for k, v in sorted(data.items())},
    }


# --- inference endpoints ---------------------------------------------------------------------

ANNOTATION_REVISION = "gpupaas.io/revision"
ENDPOINT_SERVICE_PORT = 80
# A model server may take minutes to load its weights: the startup probe gives it this long
# (period × threshold) before liveness counts.
STARTUP_PROBE_PERIOD = 10
STARTUP_PROBE_FAILURES = 60


def endpoint_path(namespace: str, workload_id: int) -> str:
    """Where an endpoint is served on the endpoint host (the prefix is stripped on the way in)."""
    return f"/endpoints/{namespace}/{workload_id}/"


def endpoint_ingress_annotations(spec: WorkloadSpec) -> dict[str, str]:
    """ingress-nginx asks the portal about every call (auth-url, with the endpoint's id):
    2xx lets it through (a team member's session, or one of the endpoint's keys), anything
    else refuses it. The endpoint's prefix is stripped before the call reaches the server."""
    e = spec.endpoint
    assert e is not None
    annotations = {
        "nginx.ingress.kubernetes.io/use-regex": "true",
        "nginx.ingress.kubernetes.io/rewrite-target": "/$2",
    }
    if e.auth_url:
        annotations[INGRESS_AUTH_URL] = f"{e.auth_url.rstrip('/')}/{spec.id}/"
        annotations[INGRESS_AUTH_METHOD] = "GET"
    return annotations


def _endpoint_env(spec: WorkloadSpec, e: EndpointShape) -> list[dict[str, Any]]:
    """Where the model is: a path on the team's volumes, or an object-store URI with the
    secret's keys by reference (the values stay in the Secret)."""
    env: list[dict[str, Any]] = [{"name": "GPUPAAS_PORT", "value": str(e.port)}]
    if e.model_path:
        env.append({"name": "GPUPAAS_MODEL_PATH", "value": e.model_path})
    if e.model_uri:
        env.append({"name": "GPUPAAS_MODEL_URI", "value": e.model_uri})
        if e.model_secret:
            env.extend(
                {
                    "name": "GPUPAAS_MODEL_" + _env_suffix(key),
                    "valueFrom": {"secretKeyRef": {"name": e.model_secret, "key": key}},
                }
                for key in e.model_secret_keys
            )
    return env


def endpoint_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """A Deployment (rolling updates that never take a ready replica away, probes on the health
    path, the production class), a Service, a network policy that lets in only the ingress
    controller on the server's port, and, with a host, the portal-authorised Ingress.

    Replicas land on any node of the class (the scheduler accounts them per replica): pinning
    them to the nodes it chose would change the pod template, and so roll out, on every scale.
    """
    e = spec.endpoint
    if e is None:
        raise ManifestError("An inference endpoint needs its port and health path.")
    name = spec.base_name
    labels = spec.labels
    container = _container(spec, "server", spec.env)
    container["env"].extend(_endpoint_env(spec, e))
    container["ports"] = [{"name": "http", "containerPort": e.port, "protocol": "TCP"}]
    probe = {"httpGet": {"path": e.health_path, "port": e.port}}
    container["startupProbe"] = {
        **probe,
        "periodSeconds": STARTUP_PROBE_PERIOD,
        "failureThreshold": STARTUP_PROBE_FAILURES,
    }
    container["readinessProbe"] = {**probe, "periodSeconds": 5, "failureThreshold": 3}
    container["livenessProbe"] = {**probe, "periodSeconds": 10, "failureThreshold": 3}
    volumes = _team_volume(spec, container)
    pod = _pod_spec(spec, container, (), restart_policy="Always", volumes=volumes)
    annotations = {**_pod_annotations(spec, ()), ANNOTATION_REVISION: str(e.revision)}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
            },
            "progressDeadlineSeconds": e.progress_deadline_seconds,
            "minReadySeconds": e.min_ready_seconds,
            "revisionHistoryLimit": 5,
            "template": {
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": pod,
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "selector": {LABEL_WORKLOAD: str(spec.id)},
            "ports": [
                {
                    "name": "http",
                    "port": ENDPOINT_SERVICE_PORT,
                    "targetPort": e.port,
                    "protocol": "TCP",
                }
            ],
        },
    }
    allow = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-ingress", "namespace": spec.namespace, "labels": labels},
        "spec": {
            "podSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": e.ingress_namespace}
                            }
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": e.port}],
                }
            ],
        },
    }
    manifests = [deployment, service, allow]
    if e.host:
        path = endpoint_path(spec.namespace, spec.id).rstrip("/")
        ingress_spec: dict[str, Any] = {
            "rules": [
                {
                    "host": e.host,
                    "http": {
                        "paths": [
                            {
                                "path": f"{path}(/|$)(.*)",
                                "pathType": "ImplementationSpecific",
                                "backend": {
                                    "service": {
                                        "name": name,
                                        "port": {"number": ENDPOINT_SERVICE_PORT},
                                    }
                                },
                            }
                        ]
                    },
                }
            ]
        }
        if e.tls_secret:
            ingress_spec["tls"] = [{"hosts": [e.host], "secretName": e.tls_secret}]
        manifests.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {
                    "name": name,
                    "namespace": spec.namespace,
                    "labels": labels,
                    "annotations": endpoint_ingress_annotations(spec),
                },
                "spec": ingress_spec,
            }
        )
    return manifests


def workload_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """The objects of a workload (without the notebook's Secret and home volume)."""
    if spec.kind == wl.KIND_INFERENCE:
        return endpoint_manifests(spec)
    if spec.kind == wl.KIND_NOTEBOOK:
        return notebook_manifests(spec)
    if spec.kind == wl.KIND_SWEEP:
        return sweep_manifests(spec)
    if spec.kind == wl.KIND_TRAINING:
        return training_manifests(spec)
    raise ValueError(f"No manifests for workloads of kind {spec.kind!r}.")
