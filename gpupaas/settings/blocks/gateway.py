"""How traffic reaches notebooks and endpoints: Gateway API routes (the default) or Ingresses
with ingress-nginx's annotations, and which gateway implementation enforces the portal's
authorisation."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import env_str

# TRAFFIC_API: "gateway-api" (an HTTPRoute per notebook and endpoint, attached to the Gateway
# GATEWAY_NAMESPACE/GATEWAY_NAME, on its listener GATEWAY_LISTENER when set; TLS is the
# Gateway's, from the certificate its listener references) or "ingress" (an Ingress with
# ingress-nginx's auth-url annotations, for clusters that still run it).
TRAFFIC_API = env_str("TRAFFIC_API", "gateway-api")
GATEWAY_NAME = env_str("GATEWAY_NAME", "gpupaas")
GATEWAY_NAMESPACE = env_str("GATEWAY_NAMESPACE", "gpupaas-gateway")
GATEWAY_LISTENER = env_str("GATEWAY_LISTENER", "")
# Who asks the portal about every request: "traefik" (a forwardAuth Middleware per route,
# attached through the route's ExtensionRef filter) or "external-auth" (Gateway API's
# ExternalAuth filter, experimental channel, for implementations that support it; the portal
# is then named as a Service, GATEWAY_AUTH_SERVICE as namespace/name:port).
GATEWAY_IMPLEMENTATION = env_str("GATEWAY_IMPLEMENTATION", "traefik")
GATEWAY_AUTH_SERVICE = env_str("GATEWAY_AUTH_SERVICE", "")
# Where the gateway's proxies run (the endpoints' network policy lets in only that namespace).
GATEWAY_PROXY_NAMESPACE = env_str("GATEWAY_PROXY_NAMESPACE", GATEWAY_NAMESPACE)

_traffic_apis = ("gateway-api", "ingress")


def _valid_service(value: str) -> bool:
    """``namespace/name:port``."""
    ref, _, port = value.rpartition(":")
    namespace, _, name = ref.partition("/")
    return bool(namespace and name and port.isdigit())


_implementations = ("traefik", "external-auth")
if TRAFFIC_API not in _traffic_apis:
    raise ImproperlyConfigured(
        f"TRAFFIC_API={TRAFFIC_API!r} is not one of {', '.join(_traffic_apis)}."
    )
if GATEWAY_IMPLEMENTATION not in _implementations:
    raise ImproperlyConfigured(
        f"GATEWAY_IMPLEMENTATION={GATEWAY_IMPLEMENTATION!r} is not one of "
        f"{', '.join(_implementations)}."
    )
if TRAFFIC_API == "gateway-api" and not (GATEWAY_NAME and GATEWAY_NAMESPACE):
    raise ImproperlyConfigured("TRAFFIC_API=gateway-api needs GATEWAY_NAME and GATEWAY_NAMESPACE.")
if (
    TRAFFIC_API == "gateway-api"
    and GATEWAY_IMPLEMENTATION == "external-auth"
    and not _valid_service(GATEWAY_AUTH_SERVICE)
):
    raise ImproperlyConfigured(
        "GATEWAY_IMPLEMENTATION=external-auth names the portal as a Service: set "
        "GATEWAY_AUTH_SERVICE=namespace/name:port (e.g. gpupaas/gpupaas:8000)."
    )
