"""Inference endpoints: their host and the portal's authorisation of every call, rollouts, and
the scaling loop with the Prometheus queries it asks per endpoint."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.blocks.gateway import GATEWAY_IMPLEMENTATION, TRAFFIC_API
from gpupaas.settings.blocks.kubernetes import PORTAL_URL
from gpupaas.settings.env import env_int, env_str

# Inference endpoints: served on ENDPOINT_HOST under /endpoints/<namespace>/<id>/, every call
# authorised by the portal (ENDPOINT_AUTH_URL: where the ingress controller asks it; a team
# member's session or one of the endpoint's keys). A rolling update whose new replicas are not
# ready within ENDPOINT_PROGRESS_DEADLINE_SECONDS is rolled back. The scaling loop runs every
# SERVING_AUTOSCALE_SECONDS and changes an endpoint's replicas at most once per
# SERVING_SCALE_COOLDOWN_SECONDS (scale-downs; scale-ups wait a third of it).
ENDPOINT_HOST = env_str("ENDPOINT_HOST", "")
ENDPOINT_AUTH_URL = env_str(
    "ENDPOINT_AUTH_URL", f"{PORTAL_URL}/endpoints/auth/" if PORTAL_URL else ""
)
# Guessing keys: after ENDPOINT_KEY_GUESSES wrong keys within ENDPOINT_KEY_GUESS_WINDOW_SECONDS
# from one address, that address is answered 429 (with Retry-After) whatever it presents; after
# as many wrong keys for one endpoint from anywhere, wrong keys for it are answered 429 (a valid
# key still opens it: someone else's guessing never locks its callers out).
ENDPOINT_KEY_GUESSES = env_int("ENDPOINT_KEY_GUESSES", 20, minimum=1)
ENDPOINT_KEY_GUESS_WINDOW_SECONDS = env_int("ENDPOINT_KEY_GUESS_WINDOW_SECONDS", 300, minimum=1)
# How long one web process remembers its "yes" to the proxy's authorisation call for the same
# endpoint key or signed-in person (0: ask the database every time): a revoked key or a
# withdrawn membership stops within this time (a key revoked through this process at once).
GATEWAY_AUTH_CACHE_SECONDS = env_int("GATEWAY_AUTH_CACHE_SECONDS", 5, minimum=0)
ENDPOINT_PROGRESS_DEADLINE_SECONDS = env_int("ENDPOINT_PROGRESS_DEADLINE_SECONDS", 600, minimum=5)
SERVING_AUTOSCALE_SECONDS = env_int("SERVING_AUTOSCALE_SECONDS", 30, minimum=5)
SERVING_SCALE_COOLDOWN_SECONDS = env_int("SERVING_SCALE_COOLDOWN_SECONDS", 300, minimum=0)
SERVING_SAMPLE_RETENTION_DAYS = env_int("SERVING_SAMPLE_RETENTION_DAYS", 30, minimum=1)
# What the scaling loop asks Prometheus per endpoint ($namespace, $service = wl-<id>): by
# default the gateway's request metrics (Traefik's per backend Service, named
# <namespace>-<service>-<port name>-<port>@kubernetesgateway; ingress-nginx's with
# TRAFFIC_API=ingress; none for another implementation: set them to its metrics or the
# server's own) and dcgm-exporter's utilisation per pod.
_traefik_service = 'service="$namespace-$service-http-80@kubernetesgateway"'
_default_rps, _default_latency = {
    "traefik": (
        f"sum(rate(traefik_service_requests_total{{{_traefik_service}}}[2m]))",
        "histogram_quantile(0.95, sum by (le) (rate(traefik_service_request_duration_seconds_"
        f"bucket{{{_traefik_service}}}[5m])))",
    ),
    "ingress": (
        'sum(rate(nginx_ingress_controller_requests{exported_namespace="$namespace",'
        'exported_service="$service"}[2m]))',
        "histogram_quantile(0.95, sum by (le) (rate(nginx_ingress_controller_request_duration_"
        'seconds_bucket{exported_namespace="$namespace",exported_service="$service"}[5m])))',
    ),
}.get("ingress" if TRAFFIC_API == "ingress" else GATEWAY_IMPLEMENTATION, ("", ""))
SERVING_RPS_QUERY = env_str("SERVING_RPS_QUERY", _default_rps)
SERVING_LATENCY_QUERY = env_str("SERVING_LATENCY_QUERY", _default_latency)
# A scrape without honor_labels renames the exporter's pod labels to exported_*: either counts.
SERVING_GPU_QUERY = env_str(
    "SERVING_GPU_QUERY",
    'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="$namespace",exported_pod=~"$service-.*"} or '
    'DCGM_FI_DEV_GPU_UTIL{namespace="$namespace",pod=~"$service-.*",exported_pod=""})',
)
if ENDPOINT_HOST and not ENDPOINT_AUTH_URL:
    raise ImproperlyConfigured(
        "Endpoints served through an ingress are authorised by the portal: set PORTAL_URL "
        "(or ENDPOINT_AUTH_URL)."
    )
