"""What every builder shares: the labels that mark an object as gpupaas's, the fixed names
and ports, and the metadata helper. Pure."""

from __future__ import annotations

from typing import Any

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


# The signed cookie that lets a person into a notebook on its host (one per notebook).
NOTEBOOK_COOKIE_PREFIX = "gpupaas-nb-"


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


INGRESS_AUTH_URL = "nginx.ingress.kubernetes.io/auth-url"


INGRESS_AUTH_SIGNIN = "nginx.ingress.kubernetes.io/auth-signin"


INGRESS_AUTH_RESPONSE_HEADERS = "nginx.ingress.kubernetes.io/auth-response-headers"


INGRESS_AUTH_METHOD = "nginx.ingress.kubernetes.io/auth-method"


def object_name(workload_id: int) -> str:
    """The name a workload's objects are created under (a sweep's Jobs, a gang's policy and a
    notebook's Secret add a suffix): the one place it is made. Only the builders use it, when
    the objects are created; everyone else reads the names stored on the workload then."""
    return f"wl-{workload_id}"


def priority_class_name(priority: str) -> str:
    return f"gpupaas-{priority}"


def team_claim_name() -> str:
    """The name of every team's shared volume claim: the one place it is named."""
    return TEAM_CLAIM


def object_meta(name: str, namespace: str | None = None, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {LABEL_MANAGED_BY: MANAGED_BY, **labels}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


class ManifestError(ValueError):
    """A workload whose objects cannot state what the scheduler decided (e.g. a gang placed
    on fewer nodes than it has replicas)."""
