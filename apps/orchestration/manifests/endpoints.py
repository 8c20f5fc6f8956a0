"""Inference endpoints: a Deployment that rolls out without losing a ready replica, its
Service, the network policy for the ingress controller, and the portal-authorised Ingress.
Pure."""

from __future__ import annotations

from typing import Any

from apps.orchestration.manifests.base import (
    INGRESS_AUTH_METHOD,
    INGRESS_AUTH_URL,
    LABEL_WORKLOAD,
    Manifest,
    ManifestError,
)
from apps.orchestration.manifests.pods import (
    base_container,
    base_pod_spec,
    env_suffix,
    mount_team_volumes,
    workload_meta,
    workload_pod_annotations,
)
from apps.orchestration.manifests.routes import route_manifests
from apps.orchestration.manifests.spec import EndpointShape, WorkloadSpec, grace_seconds

ANNOTATION_REVISION = "gpupaas.io/revision"


ENDPOINT_SERVICE_PORT = 80


# A model server may take minutes to load its weights: the startup probe gives it this long
# (period × threshold) before liveness counts.
STARTUP_PROBE_PERIOD = 10


STARTUP_PROBE_FAILURES = 60


# A replica told to stop (a rolling update, a scale down) goes on serving this long before its
# server gets SIGTERM: the EndpointSlice controller and the ingress controller take a moment to
# stop sending it calls, and a server that closes its socket at once refuses those still on
# their way (within the pod's grace period, which it is part of).
ENDPOINT_DRAIN_SECONDS = 5


def endpoint_prefix(namespace: str) -> str:
    """Where a namespace's endpoints are served on the endpoint host, one path each below."""
    return f"/endpoints/{namespace}"


def endpoint_path(namespace: str, workload_id: int) -> str:
    """Where an endpoint is served on the endpoint host (the prefix is stripped on the way in)."""
    return f"{endpoint_prefix(namespace)}/{workload_id}/"


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
                    "name": "GPUPAAS_MODEL_" + env_suffix(key),
                    "valueFrom": {"secretKeyRef": {"name": e.model_secret, "key": key}},
                }
                for key in e.model_secret_keys
            )
    return env


def _server_container(spec: WorkloadSpec, e: EndpointShape) -> dict[str, Any]:
    """The model server: its port, probes on the health path, and the drain before it stops."""
    container = base_container(spec, "server", spec.env)
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
    drain = min(ENDPOINT_DRAIN_SECONDS, grace_seconds(spec))
    if drain > 0:
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": drain}}}
    return container


def _deployment(spec: WorkloadSpec, e: EndpointShape) -> Manifest:
    container = _server_container(spec, e)
    volumes = mount_team_volumes(spec, container)
    pod = base_pod_spec(spec, container, (), restart_policy="Always", volumes=volumes)
    annotations = {**workload_pod_annotations(spec, ()), ANNOTATION_REVISION: str(e.revision)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": workload_meta(spec),
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
                "metadata": {"labels": spec.labels, "annotations": annotations},
                "spec": pod,
            },
        },
    }


def _endpoint_service(spec: WorkloadSpec, e: EndpointShape) -> Manifest:
    port = {"name": "http", "port": ENDPOINT_SERVICE_PORT, "targetPort": e.port, "protocol": "TCP"}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": workload_meta(spec),
        "spec": {"selector": {LABEL_WORKLOAD: str(spec.id)}, "ports": [port]},
    }


def _ingress_policy(spec: WorkloadSpec, e: EndpointShape) -> Manifest:
    """Only the ingress controller may reach the server, and only on its port."""
    controller = {"matchLabels": {"kubernetes.io/metadata.name": e.ingress_namespace}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": workload_meta(spec, "-ingress"),
        "spec": {
            "podSelector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [{"namespaceSelector": controller}],
                    "ports": [{"protocol": "TCP", "port": e.port}],
                }
            ],
        },
    }


def _endpoint_ingress(spec: WorkloadSpec, e: EndpointShape) -> Manifest:
    """The endpoint's path on its host, the prefix stripped on the way in."""
    path = endpoint_path(spec.namespace, spec.id).rstrip("/")
    backend = {"service": {"name": spec.base_name, "port": {"number": ENDPOINT_SERVICE_PORT}}}
    route = {"path": f"{path}(/|$)(.*)", "pathType": "ImplementationSpecific", "backend": backend}
    ingress_spec: dict[str, Any] = {"rules": [{"host": e.host, "http": {"paths": [route]}}]}
    if e.tls_secret:
        ingress_spec["tls"] = [{"hosts": [e.host], "secretName": e.tls_secret}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {**workload_meta(spec), "annotations": endpoint_ingress_annotations(spec)},
        "spec": ingress_spec,
    }


def endpoint_auth_url(spec: WorkloadSpec) -> str:
    """The portal's auth address for this endpoint (it names the endpoint)."""
    e = spec.endpoint
    assert e is not None
    return f"{e.auth_url.rstrip('/')}/{spec.id}/" if e.auth_url else ""


def _endpoint_route(spec: WorkloadSpec, e: EndpointShape) -> list[Manifest]:
    """The endpoint's HTTPRoute on its host: its prefix replaced by ``/`` on the way in, every
    call authorised by the portal first."""
    assert e.gateway is not None
    return route_manifests(
        spec,
        e.gateway,
        hostname=e.host,
        path=endpoint_path(spec.namespace, spec.id).rstrip("/"),
        service=spec.base_name,
        port=ENDPOINT_SERVICE_PORT,
        auth_url=endpoint_auth_url(spec),
        rewrite_prefix="/",
    )


def endpoint_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """A Deployment (rolling updates that never take a ready replica away, probes on the health
    path, the production class), a Service, a network policy that lets in only the ingress
    controller on the server's port, and, with a host, its portal-authorised route: an
    HTTPRoute on the platform's Gateway, or an Ingress (TRAFFIC_API=ingress).

    Replicas land on any node of the class (the scheduler accounts them per replica): pinning
    them to the nodes it chose would change the pod template, and so roll out, on every scale.
    """
    e = spec.endpoint
    if e is None:
        raise ManifestError("An inference endpoint needs its port and health path.")
    manifests = [_deployment(spec, e), _endpoint_service(spec, e), _ingress_policy(spec, e)]
    if e.host and e.gateway is not None:
        manifests.extend(_endpoint_route(spec, e))
    elif e.host:
        manifests.append(_endpoint_ingress(spec, e))
    return manifests
