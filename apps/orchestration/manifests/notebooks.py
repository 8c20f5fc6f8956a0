"""Notebooks: JupyterLab behind the portal-authorised ingress, the owner's home volume and
the token Secret. Pure."""

from __future__ import annotations

from typing import Any

from apps.orchestration.manifests.base import (
    INGRESS_AUTH_METHOD,
    INGRESS_AUTH_RESPONSE_HEADERS,
    INGRESS_AUTH_SIGNIN,
    INGRESS_AUTH_URL,
    LABEL_MANAGED_BY,
    LABEL_OWNER_ID,
    LABEL_TEAM,
    LABEL_WORKLOAD,
    MANAGED_BY,
    NOTEBOOK_COOKIE_PREFIX,
    NOTEBOOK_PORT,
    Manifest,
)
from apps.orchestration.manifests.pods import (
    base_container,
    base_pod_spec,
    mount_team_volumes,
    workload_meta,
    workload_pod_annotations,
)
from apps.orchestration.manifests.routes import route_manifests
from apps.orchestration.manifests.spec import WorkloadSpec


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


def notebook_prefix(namespace: str) -> str:
    """Where a namespace's notebooks are served on the notebook host, one path each below."""
    return f"/notebooks/{namespace}"


def notebook_path(namespace: str, workload_id: int) -> str:
    """Where a notebook is served on the notebook host: its Ingress path and Jupyter's base URL."""
    return f"{notebook_prefix(namespace)}/{workload_id}/"


def _notebook_container(spec: WorkloadSpec, base_url: str) -> dict[str, Any]:
    """JupyterLab on NOTEBOOK_PORT under ``base_url``, its token from the token Secret."""
    container = base_container(spec, "notebook", spec.env)
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
    container["readinessProbe"] = {
        "httpGet": {"path": f"{base_url}api", "port": NOTEBOOK_PORT},
        "periodSeconds": 5,
    }
    return container


def _notebook_statefulset(spec: WorkloadSpec, base_url: str) -> Manifest:
    container = _notebook_container(spec, base_url)
    data_volumes = mount_team_volumes(spec, container)
    pod = base_pod_spec(
        spec,
        container,
        spec.placement,
        restart_policy="Always",
        volumes=[
            {"name": "home", "persistentVolumeClaim": {"claimName": spec.home_claim}},
            *data_volumes,
        ],
    )
    annotations = workload_pod_annotations(spec, spec.placement)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": workload_meta(spec),
        "spec": {
            "replicas": 1,
            "serviceName": spec.base_name,
            "selector": {"matchLabels": {LABEL_WORKLOAD: str(spec.id)}},
            "template": {
                "metadata": {
                    "labels": spec.labels,
                    **({"annotations": annotations} if annotations else {}),
                },
                "spec": pod,
            },
        },
    }


def _notebook_ingress(spec: WorkloadSpec, base_url: str) -> Manifest:
    backend = {"service": {"name": spec.base_name, "port": {"number": 80}}}
    rule: dict[str, Any] = {
        "http": {"paths": [{"path": base_url, "pathType": "Prefix", "backend": backend}]}
    }
    if spec.notebook_host:
        rule["host"] = spec.notebook_host
    ingress_spec: dict[str, Any] = {"rules": [rule]}
    if spec.notebook_tls_secret and spec.notebook_host:
        ingress_spec["tls"] = [
            {"hosts": [spec.notebook_host], "secretName": spec.notebook_tls_secret}
        ]
    metadata = workload_meta(spec)
    ingress_annotations = notebook_ingress_annotations(spec)
    if ingress_annotations:
        metadata["annotations"] = ingress_annotations
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": metadata,
        "spec": ingress_spec,
    }


def notebook_route_auth_url(spec: WorkloadSpec) -> str:
    """The portal's auth address for this notebook's route: it names the notebook, so the
    portal decides on the notebook the gateway routes to (see manifests.routes)."""
    if not spec.notebook_auth_url:
        return ""
    return f"{spec.notebook_auth_url.rstrip('/')}/{spec.id}/"


def _notebook_route(spec: WorkloadSpec, base_url: str) -> list[Manifest]:
    """The notebook's HTTPRoute on the platform's Gateway (and Traefik's forwardAuth): the
    Jupyter token comes back from the portal in ``Authorization``, the renewed access cookie
    goes on to the browser."""
    assert spec.notebook_gateway is not None
    return route_manifests(
        spec,
        spec.notebook_gateway,
        hostname=spec.notebook_host,
        path=base_url.rstrip("/"),
        service=spec.base_name,
        port=80,
        auth_url=notebook_route_auth_url(spec),
        response_headers=("Authorization",),
        response_cookies=(f"{NOTEBOOK_COOKIE_PREFIX}{spec.id}",),
    )


def notebook_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """JupyterLab as a StatefulSet of one, the user's home volume, a Service and its route: an
    HTTPRoute on the platform's Gateway, or an Ingress (TRAFFIC_API=ingress).

    The Jupyter token lives in a Secret created by the service (never in the image, the
    manifest or the logs); the pod reads it from the environment.
    """
    base_url = spec.notebook_base_url or notebook_path(spec.namespace, spec.id)
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": workload_meta(spec),
        "spec": {
            "selector": {LABEL_WORKLOAD: str(spec.id)},
            "ports": [{"name": "http", "port": 80, "targetPort": NOTEBOOK_PORT}],
        },
    }
    if spec.notebook_gateway is not None:
        return [_notebook_statefulset(spec, base_url), service, *_notebook_route(spec, base_url)]
    return [
        _notebook_statefulset(spec, base_url),
        service,
        _notebook_ingress(spec, base_url),
    ]


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
