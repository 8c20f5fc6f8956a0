"""Gateway API routes of notebooks and endpoints, built on plain data."""

from __future__ import annotations

from dataclasses import replace

from apps.orchestration import manifests as m
from apps.orchestration.manifests.routes import route_manifests
from apps.workloads import core as wl

GATEWAY = m.GatewayShape(name="gpupaas", namespace="gpupaas-gateway", section="https")


def spec(**kw: object) -> m.WorkloadSpec:
    values: dict[str, object] = {
        "id": 7,
        "name": "serve",
        "kind": wl.KIND_INFERENCE,
        "team_slug": "vision",
        "namespace": "team-vision",
        "owner": "alice",
        "image": "registry/serve:1",
        "gpu_limits": {"nvidia.com/gpu": "1"},
        "gpu_product": "NVIDIA-L4",
        "sharing_mode": "exclusive",
        "priority_class": "production",
    }
    values.update(kw)
    return m.WorkloadSpec(**values)  # type: ignore[arg-type]


def endpoint_spec(gateway: m.GatewayShape | None = GATEWAY) -> m.WorkloadSpec:
    shape = m.EndpointShape(
        port=8000,
        health_path="/health",
        host="serve.gpu.example.com",
        auth_url="http://gpupaas-web.gpupaas.svc/endpoints/auth/",
        gateway=gateway,
    )
    return spec(endpoint=shape)


def test_endpoint_route_strips_its_prefix_and_asks_the_portal_with_its_id() -> None:
    objects = {o["kind"]: o for o in m.endpoint_manifests(endpoint_spec())}
    assert "Ingress" not in objects
    route = objects["HTTPRoute"]
    assert route["spec"]["hostnames"] == ["serve.gpu.example.com"]
    assert route["spec"]["parentRefs"][0]["sectionName"] == "https"
    rule = route["spec"]["rules"][0]
    assert rule["matches"][0]["path"] == {"type": "PathPrefix", "value": "/endpoints/team-vision/7"}
    assert rule["filters"][1] == {
        "type": "URLRewrite",
        "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}},
    }
    assert rule["backendRefs"] == [{"name": "wl-7", "port": m.ENDPOINT_SERVICE_PORT}]
    auth = objects["Middleware"]["spec"]["forwardAuth"]
    assert auth == {
        "address": "http://gpupaas-web.gpupaas.svc/endpoints/auth/7/",
        "trustForwardHeader": False,
    }


def test_ingress_stays_available_by_setting() -> None:
    kinds = [o["kind"] for o in m.endpoint_manifests(endpoint_spec(gateway=None))]
    assert "Ingress" in kinds and "HTTPRoute" not in kinds


def test_external_auth_filter_names_the_portal_service_and_the_auth_path() -> None:
    gateway = replace(
        GATEWAY, implementation="external-auth", auth_service="gpupaas/gpupaas-web:8000"
    )
    objects = route_manifests(
        spec(kind=wl.KIND_NOTEBOOK),
        gateway,
        hostname="nb.example.com",
        path="/notebooks/team-vision/7",
        service="wl-7",
        port=80,
        auth_url="http://gpupaas-web.gpupaas.svc:8000/notebooks/auth/7/",
        response_headers=("Authorization",),
    )
    assert [o["kind"] for o in objects] == ["HTTPRoute"]  # no Middleware
    assert objects[0]["spec"]["rules"][0]["filters"] == [
        {
            "type": "ExternalAuth",
            "externalAuth": {
                "protocol": "HTTP",
                "backendRef": {
                    "kind": "Service",
                    "namespace": "gpupaas",
                    "name": "gpupaas-web",
                    "port": 8000,
                },
                "http": {
                    "path": "/notebooks/auth/7",
                    "allowedResponseHeaders": ["Authorization"],
                },
            },
        }
    ]


def test_no_auth_address_no_route() -> None:
    """The portal never publishes a route it does not guard."""
    assert (
        route_manifests(
            spec(), GATEWAY, hostname="", path="/x", service="wl-7", port=80, auth_url=""
        )
        == []
    )


def test_a_team_with_endpoints_on_the_gateway_has_a_route_for_the_ids_that_do_not_exist() -> None:
    """Its endpoint paths that name no endpoint go to the portal's answer for endpoint 0 (none
    has that id), the one a wrong key gets, instead of the gateway's own 404."""
    team = m.TeamSpec(
        slug="vision",
        namespace="team-vision",
        gateway=GATEWAY,
        endpoint_host="serve.example.com",
        endpoint_auth_url="http://portal.example.com/endpoints/auth/",
    )
    objects = {
        o["kind"]: o
        for o in m.team_manifests(team)
        if o["metadata"]["name"] == ("gpupaas-unknown-endpoint")
    }
    assert set(objects) == {"Service", "HTTPRoute", "Middleware"}
    assert "selector" not in objects["Service"]["spec"]  # no pod is ever behind it
    route = objects["HTTPRoute"]["spec"]
    assert route["hostnames"] == ["serve.example.com"]
    (rule,) = route["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/endpoints/team-vision"}}]
    assert rule["filters"][0]["extensionRef"]["name"] == "gpupaas-unknown-endpoint"
    assert objects["Middleware"]["spec"]["forwardAuth"]["address"] == (
        "http://portal.example.com/endpoints/auth/0/"
    )
    # An endpoint's own route is longer, so it keeps its calls.
    endpoint_route = next(
        o for o in m.endpoint_manifests(endpoint_spec(gateway=GATEWAY)) if o["kind"] == "HTTPRoute"
    )
    own = endpoint_route["spec"]["rules"][0]["matches"][0]["path"]["value"]
    assert own.startswith(rule["matches"][0]["path"]["value"] + "/")
    # Without a Gateway or an endpoint host: nothing.
    for other in (replace(team, gateway=None), replace(team, endpoint_host="")):
        assert not [o for o in m.team_manifests(other) if o["kind"] == "HTTPRoute"]


def test_a_team_with_notebooks_on_one_host_has_a_route_for_the_ids_that_do_not_exist() -> None:
    """Its notebook paths that name no notebook go to the portal's answer for notebook 0 (the
    sign-in, or 403), the one someone else's notebook gets, instead of the gateway's 404."""
    team = m.TeamSpec(
        slug="vision",
        namespace="team-vision",
        gateway=GATEWAY,
        notebook_host="notebooks.example.com",
        notebook_auth_url="http://portal.example.com/notebooks/auth/",
    )
    objects = {
        o["kind"]: o
        for o in m.team_manifests(team)
        if o["metadata"]["name"] == "gpupaas-unknown-notebook"
    }
    assert set(objects) == {"Service", "HTTPRoute", "Middleware"}
    route = objects["HTTPRoute"]["spec"]
    assert route["hostnames"] == ["notebooks.example.com"]
    (rule,) = route["rules"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/notebooks/team-vision"}}]
    assert objects["Middleware"]["spec"]["forwardAuth"]["address"] == (
        "http://portal.example.com/notebooks/auth/0/"
    )
    # A notebook's own route is longer, so it keeps its requests.
    assert m.notebook_path("team-vision", 7).startswith(rule["matches"][0]["path"]["value"] + "/")
    # No endpoint host: no endpoint route; no notebook host (or a wildcard): none for notebooks.
    assert not [o for o in m.team_manifests(team) if "unknown-endpoint" in o["metadata"]["name"]]
    assert not [
        o for o in m.team_manifests(replace(team, notebook_host="")) if o["kind"] == "HTTPRoute"
    ]
