"""A workload as the builders need it (WorkloadSpec and its parts), filled by the
selectors from the database. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from apps.catalog.resources import GpuClaim
from apps.orchestration.manifests.base import (
    LABEL_KIND,
    LABEL_MANAGED_BY,
    LABEL_TEAM,
    LABEL_WORKLOAD,
    MANAGED_BY,
    TEAM_CLAIM,
    object_name,
)
from apps.workloads import core as wl


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
class GatewayShape:
    """The Gateway API route of a notebook or endpoint: the Gateway it attaches to (its
    listener ``section`` when set) and who authorises each request: ``traefik`` (a forwardAuth
    Middleware through the route's ExtensionRef filter) or ``external-auth`` (Gateway API's
    ExternalAuth filter, calling the portal's Service ``auth_service``: namespace/name:port)."""

    name: str
    namespace: str
    section: str = ""
    implementation: str = "traefik"
    auth_service: str = ""


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
    # Set: an HTTPRoute on this Gateway instead of an Ingress.
    gateway: GatewayShape | None = None


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
    # Set: the notebook is routed by an HTTPRoute on this Gateway instead of an Ingress.
    notebook_gateway: GatewayShape | None = None
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
    # The notebook's token Secret as stored when it was created (empty: not created yet).
    token_secret_name: str = ""
    # The class allocates through DRA (as it did when this workload was admitted): the devices
    # each replica claims; None: extended resources of the device plugin (gpu_limits).
    gpu_claim: GpuClaim | None = None

    @property
    def base_name(self) -> str:
        return object_name(self.id)

    @property
    def notebook_token_secret(self) -> str:
        """The name of a notebook's token Secret: the one stored when it was created, else the
        one it is created under."""
        return self.token_secret_name or f"{self.base_name}-token"

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED_BY: MANAGED_BY,
            LABEL_WORKLOAD: str(self.id),
            LABEL_TEAM: self.team_slug,
            LABEL_KIND: self.kind,
        }


def is_gang(spec: WorkloadSpec) -> bool:
    """A multi-node training job: one pod per replica, each on its own node, all together."""
    return spec.kind == wl.KIND_TRAINING and spec.replicas > 1


def grace_seconds(spec: WorkloadSpec) -> int:
    """The pod's terminationGracePeriodSeconds: the grace the scheduler waits for."""
    if spec.grace_seconds is not None:
        return spec.grace_seconds
    return wl.grace_seconds_for(spec.priority_class)
