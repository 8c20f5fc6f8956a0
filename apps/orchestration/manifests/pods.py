"""The parts of every workload's pod: container, resources, security, environment,
affinity to the nodes the scheduler chose, and the team's and datasets' volumes. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from apps.catalog import core as catalog_core
from apps.catalog.resources import PRODUCT_LABEL
from apps.orchestration.manifests.base import (
    ANNOTATION_HAMI_UUID,
    DATASETS_MOUNT,
    LABEL_WORKLOAD,
    SERVICE_ACCOUNT,
    TEAM_MOUNT,
    priority_class_name,
)
from apps.orchestration.manifests.claims import POD_CLAIM, pod_claims
from apps.orchestration.manifests.spec import (
    DatasetMount,
    ReplicaPlacement,
    SecretEnv,
    WorkloadSpec,
    grace_seconds,
    is_gang,
)


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
    gpus = {} if spec.gpu_claim is not None else spec.gpu_limits
    amounts = {"cpu": f"{spec.cpu_milli}m", "memory": f"{spec.memory_mib}Mi", **gpus}
    # Extended resources need requests equal to limits; CPU and memory are Guaranteed too.
    resources: dict[str, Any] = {"requests": dict(amounts), "limits": dict(amounts)}
    if spec.gpu_claim is not None:
        # The GPUs come from the pod's ResourceClaim (DRA), not from extended resources.
        resources["claims"] = [{"name": POD_CLAIM}]
    return resources


def _env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": str(v)} for k, v in sorted(values.items())]


def _secret_env(refs: Sequence[SecretEnv]) -> list[dict[str, Any]]:
    """Variables that take a secret's key: the value stays in the Secret, never the manifest."""
    return [
        {"name": r.env, "valueFrom": {"secretKeyRef": {"name": r.secret, "key": r.key}}}
        for r in refs
        if r.env
    ]


def _affinity(spec: WorkloadSpec, nodes: Sequence[str]) -> dict[str, Any]:
    """The pod may land only on a node the scheduler chose, and a gang's pods on distinct ones.

    One node selector term per chosen node (terms are ORed; a ``metadata.name`` field
    selector takes exactly one value). With the gang's required anti-affinity on hostname,
    the cluster's scheduler has exactly one assignment: one replica on each chosen node.
    """

    def product() -> list[dict[str, Any]]:
        return [{"key": PRODUCT_LABEL, "operator": "In", "values": [spec.gpu_product]}]

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


def workload_pod_annotations(
    spec: WorkloadSpec, placements: Sequence[ReplicaPlacement]
) -> dict[str, str]:
    annotations = dict(spec.pod_annotations)
    uuids = [u for p in placements for u in p.gpu_uuids]
    if spec.sharing_mode == catalog_core.SHARING_HAMI and uuids:
        annotations[ANNOTATION_HAMI_UUID] = ",".join(uuids)
    return annotations


def base_pod_spec(
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
    claims = pod_claims(spec)
    if claims:
        pod["resourceClaims"] = claims
    if subdomain:
        pod["subdomain"] = subdomain
    return pod


def env_suffix(name: str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "_" for c in name.upper())


def dataset_env_prefix(name: str) -> str:
    """GPUPAAS_DATASET_<NAME>_: the variables of an object-store dataset."""
    return f"GPUPAAS_DATASET_{env_suffix(name)}_"


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
                    "name": prefix + env_suffix(key),
                    "valueFrom": {"secretKeyRef": {"name": d.secret, "key": key}},
                }
                for key in d.secret_keys
            )
    return env


def mount_team_volumes(spec: WorkloadSpec, container: dict[str, Any]) -> list[dict[str, Any]]:
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


def base_container(spec: WorkloadSpec, name: str, env: Mapping[str, str]) -> dict[str, Any]:
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


def workload_meta(spec: WorkloadSpec, suffix: str = "") -> dict[str, Any]:
    """The metadata of a workload's own object: its name (``suffix`` for a second one of a
    kind), namespace and labels."""
    return {"name": spec.base_name + suffix, "namespace": spec.namespace, "labels": spec.labels}
