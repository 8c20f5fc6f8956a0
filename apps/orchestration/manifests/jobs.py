"""Training jobs (one pod, or a gang with its rendezvous) and sweeps (one Job per point of
the grid). Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apps.orchestration.manifests.base import (
    LABEL_SWEEP_POINT,
    LABEL_WORKLOAD,
    RENDEZVOUS_PORT,
    TEAM_MOUNT,
    Manifest,
    ManifestError,
)
from apps.orchestration.manifests.pods import (
    base_container,
    base_pod_spec,
    mount_team_volumes,
    workload_meta,
    workload_pod_annotations,
)
from apps.orchestration.manifests.spec import WorkloadSpec, is_gang
from apps.workloads import core as wl


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


def _gang_container(spec: WorkloadSpec) -> dict[str, Any]:
    """A gang's main container, with torchrun-style rendezvous: pod 0 of the Indexed Job is
    the master, reached by its stable name <job>-0 under the headless Service that is the
    pods' subdomain. PET_* are the same values under the names torchrun reads for its own
    options; each pod's rank is its completion index."""
    name = spec.base_name
    env = _job_env(spec, spec.env)
    rendezvous = {
        "MASTER_ADDR": f"{name}-0.{name}",
        "MASTER_PORT": str(RENDEZVOUS_PORT),
        "NNODES": str(spec.replicas),
        "NPROC_PER_NODE": str(spec.gpus_per_replica),
    }
    env.update(rendezvous)
    env.update({f"PET_{k}": v for k, v in rendezvous.items()})
    env["WORLD_SIZE"] = str(spec.replicas * spec.gpus_per_replica)
    container = base_container(spec, "main", env)
    index = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    container["env"].extend(
        {"name": rank, "valueFrom": {"fieldRef": {"fieldPath": index}}}
        for rank in ("NODE_RANK", "PET_NODE_RANK")
    )
    container["ports"] = [{"name": "rendezvous", "containerPort": RENDEZVOUS_PORT}]
    return container


def _gang_network(spec: WorkloadSpec) -> list[Manifest]:
    """The headless Service the gang's pods find each other by, and the policy that lets
    them talk to each other."""
    own = {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": workload_meta(spec),
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
        "metadata": workload_meta(spec, "-peers"),
        "spec": {
            "podSelector": own,
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": own}]}],
            "egress": [{"to": [{"podSelector": own}]}],
        },
    }
    return [service, peers]


def training_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """A batch/v1 Job; several replicas become an Indexed Job with a headless Service and
    torchrun-style rendezvous environment."""
    name = spec.base_name
    labels = spec.labels
    annotations = workload_pod_annotations(spec, spec.placement)
    if spec.replicas == 1:
        container = base_container(spec, "main", _job_env(spec, spec.env))
        volumes = mount_team_volumes(spec, container)
        pod = base_pod_spec(
            spec, container, spec.placement, restart_policy="Never", volumes=volumes
        )
        return [_job(spec, name, labels, pod, annotations)]
    nodes = {p.node for p in spec.placement}
    if spec.placement and len(nodes) < spec.replicas:
        raise ManifestError(
            f"{spec.replicas} replicas must run on {spec.replicas} different nodes, but the "
            f"placement names {len(nodes)} ({', '.join(sorted(nodes))})."
        )
    container = _gang_container(spec)
    volumes = mount_team_volumes(spec, container)
    pod = base_pod_spec(
        spec, container, spec.placement, restart_policy="Never", volumes=volumes, subdomain=name
    )
    job = _job(spec, name, labels, pod, annotations, completions=spec.replicas, indexed=True)
    return [*_gang_network(spec), job]


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
        container = base_container(point_spec, "main", _job_env(spec, env, index))
        volumes = mount_team_volumes(spec, container)
        pod = base_pod_spec(
            point_spec, container, placement, restart_policy="Never", volumes=volumes
        )
        manifests.append(
            _job(
                point_spec,
                f"{spec.base_name}-{index}",
                labels,
                pod,
                workload_pod_annotations(spec, placement),
            )
        )
    return manifests


def _with(spec: WorkloadSpec, **changes: Any) -> WorkloadSpec:
    from dataclasses import replace

    return replace(spec, **changes)
