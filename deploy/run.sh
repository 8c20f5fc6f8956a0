#!/usr/bin/env bash
# Runs the portal at http://127.0.0.1:8000 with demo data on local defaults: SQLite (unless
# DATABASE_URL is set), a local Redis, a Celery worker with beat, and the simulated
# Kubernetes cluster (deploy/kubesim, built on first use) in the background, with its gateway
# on 127.0.0.1:8890 (Traefik on Gateway API where the nodes are real; the dev gateway otherwise).
#   KUBESIM=0   skip the simulated cluster
#   REAL_NODES=auto|1|0   real nodes in the cluster (pods really run): on where the machine
#               allows it (root, Debian's containerd/runc installable); 0 turns them off
#   OIDC=1      sign in through the development OpenID provider instead of the demo login
#   PORT=8000   where the portal listens (REDIS_PORT=6379 its Redis; GPUPAAS_VAR_DIR=var its
#               database, logs and the cluster's data)
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8000}"
REDIS_PORT="${REDIS_PORT:-6379}"
VAR="${GPUPAAS_VAR_DIR:-$ROOT/var}"
export GPUPAAS_VAR_DIR="$VAR"
mkdir -p "$VAR/log"
export DJANGO_SETTINGS_MODULE="${DJANGO_SETTINGS_MODULE:-gpupaas.settings.dev}"
export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:$REDIS_PORT/0}"

bootstrap_python
ensure_redis "$REDIS_PORT" "$VAR/redis"

pids=()
cleanup() {
  trap - EXIT INT TERM
  log "stopping"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Everything this command started stops with it, the Redis it started included.
  stop_redis "$REDIS_PORT"
}
trap cleanup EXIT INT TERM

if [ "${OIDC:-0}" = 1 ]; then
  ensure_node_deps
  node deploy/oidc-provider/server.js --port 9000 --config deploy/oidc-provider/config.dev.json \
    > "$VAR/log/oidc-provider.log" 2>&1 &
  pids+=($!)
  issuer="http://127.0.0.1:9000"
  # The endpoints come from the provider's discovery document.
  export OIDC_RP_CLIENT_ID=gpupaas-dev OIDC_RP_CLIENT_SECRET=gpupaas-dev-secret \
    OIDC_OP_ISSUER="$issuer" \
    OIDC_ADMIN_GROUPS=gpupaas-admins OIDC_PROVIDER_NAME="the development provider"
  log "OpenID provider at $issuer (users alice/bob/carol/dave/admin, password <user>-password)"
fi

kubeconfig=""
if [ "${KUBESIM:-1}" = 1 ]; then
  if command -v go >/dev/null; then
    kubeconfig="$VAR/kubesim/admin.kubeconfig"
    real=()
    case "${REAL_NODES:-auto}" in
      0) ;;
      1) ensure_real_node_deps; real=(--real-nodes) ;;
      *)
        if [ "$(id -u)" = 0 ] && ensure_real_node_deps 2>/dev/null; then
          real=(--real-nodes)
        else
          log "real nodes off (they need root and Debian's containerd and runc): pods are simulated"
        fi
        ;;
    esac
    # The cold builds' minutes, as measured (docs/first-start.md), for the words below.
    read -r KUBESIM_COLD_MIN COREDNS_COLD_MIN TRAEFIK_COLD_MIN < <("$PY" -c "
from deploy.devtools import coredns, kubesim, traefik
print(kubesim.COLD_BUILD_MINUTES, coredns.COLD_BUILD_MINUTES, traefik.COLD_BUILD_MINUTES)")
    if [ ${#real[@]} -gt 0 ]; then
      # The real nodes advertise the machine's own CPUs: replicas ask for a quarter core.
      export WORKLOAD_CPU_MILLI="${WORKLOAD_CPU_MILLI:-250}" WORKLOAD_MEMORY_MIB="${WORKLOAD_MEMORY_MIB:-2048}"
      log "starting the cluster with 3 real nodes in the background (REAL_NODES=0 turns them off);"
      log "  a first start builds the cluster (~$KUBESIM_COLD_MIN min on 2 cores), the images (~4 min),"
      log "  CoreDNS (~$COREDNS_COLD_MIN min) and the gateway (~$TRAEFIK_COLD_MIN min); its progress follows"
      log "  here and in var/log/kubesim.log; until it is up the portal says \"the cluster is starting\""
    else
      log "starting the simulated cluster in the background (a first run builds it, ~$KUBESIM_COLD_MIN min"
      log "  on 2 cores; its progress follows here and in var/log/kubesim.log; until it is up the"
      log "  portal says \"the cluster is starting\")"
    fi
    rm -f "$VAR/kubesim/READY"
    "$PY" -m deploy.devtools.kubesim up --data-dir "$VAR/kubesim" "${real[@]}" \
      > "$VAR/log/kubesim.log" 2>&1 &
    kubesim_pid=$!
    pids+=("$kubesim_pid")
    # NVIDIA's DRA driver's part on the simulated GPU nodes (its DeviceClasses and
    # ResourceSlices), once the cluster is READY: GPU classes set to DRA find their devices.
    (while [ ! -f "$VAR/kubesim/READY" ]; do sleep 2; done
     "$PY" -m deploy.devtools.dra --kubeconfig "$kubeconfig" --wait 120) \
      > "$VAR/log/dra.log" 2>&1 &
    pids+=($!)
    # The builds' progress, the images and the start reach the terminal too, until the cluster
    # is READY (or stops).
    (tail --pid="$kubesim_pid" -n +1 -F "$VAR/log/kubesim.log" 2>/dev/null \
      | grep --line-buffered -E "^(kubesim|coredns): |building|built|images ready|waiting|READY in|FAILED|real node" \
      | sed -u 's/^/  [cluster] /' >&2) &
    pids+=($!)
    # Simulated DCGM metrics of the cluster's GPUs, scraped by a local Prometheus.
    "$PY" -m deploy.devtools.dcgm_sim --kubeconfig "$kubeconfig" --port 9400 --wait 3600 \
      > "$VAR/log/dcgm-sim.log" 2>&1 &
    pids+=($!)
    apt_install prometheus || log "Prometheus is not installed: no utilisation data"
    if command -v prometheus >/dev/null; then
      "$PY" -m deploy.devtools.prometheus up --data-dir "$VAR/prometheus" --port 9090 \
        --target 127.0.0.1:9400 > "$VAR/log/prometheus.log" 2>&1 &
      pids+=($!)
      export PROMETHEUS_URL="${PROMETHEUS_URL:-http://127.0.0.1:9090}"
    fi
    if [ ${#real[@]} -gt 0 ]; then
      # The gateway of development: Traefik serves the platform's Gateway (Gateway API) on
      # loopback port 8890, each notebook's and endpoint's HTTPRoute asking the portal about
      # every request (forwardAuth). Built once from its Go module (~12 min cold on 2 cores;
      # cached by version under ~/.cache/gpupaas/traefik).
      (while [ ! -f "$VAR/kubesim/READY" ]; do sleep 2; done
       "$PY" -m deploy.devtools.traefik up --kubeconfig "$kubeconfig" --port 8890 \
         --data-dir "$VAR/traefik") > "$VAR/log/traefik.log" 2>&1 &
      traefik_pid=$!
      pids+=("$traefik_pid")
      # Its build's progress reaches the terminal too.
      (tail --pid="$traefik_pid" -n +1 -F "$VAR/log/traefik.log" 2>/dev/null \
        | grep --line-buffered -E "^traefik: (building|built|counting|waiting)|FAILED|failed" \
        | sed -u 's/^/  [gateway] /' >&2) &
      pids+=($!)
      export TRAFFIC_API="${TRAFFIC_API:-gateway-api}"
    else
      # Pods on simulated nodes run no containers: the dev gateway does ingress-nginx's part
      # with the cluster's Ingresses (TRAFFIC_API=ingress) and answers for those pods with a
      # stand-in page (--stand-in), so "Open notebook" still leads somewhere.
      "$PY" -m deploy.devtools.dev_gateway --port 8890 --kubeconfig "$kubeconfig" --stand-in \
        > "$VAR/log/dev-gateway.log" 2>&1 &
      pids+=($!)
      export TRAFFIC_API="${TRAFFIC_API:-ingress}"
    fi
    # Browsers take *.localhost for this machine: notebooks and endpoints at the URLs the
    # portal shows, through the gateway on 8890.
    export NOTEBOOK_HOST="${NOTEBOOK_HOST:-http://notebooks.localhost:8890}"
    export ENDPOINT_HOST="${ENDPOINT_HOST:-http://serve.localhost:8890}"
    export PORTAL_URL="${PORTAL_URL:-http://127.0.0.1:$PORT}"
  else
    log "Go is not installed: running without the simulated cluster"
  fi
fi

"$PY" manage.py migrate --noinput -v0
"$PY" manage.py seed_demo ${kubeconfig:+--kubeconfig "$kubeconfig"}

"$PY" -m celery -A gpupaas worker --beat --loglevel=INFO --concurrency=2 \
  --schedule "$VAR/celerybeat-schedule" > "$VAR/log/celery.log" 2>&1 &
pids+=($!)

log "portal on http://127.0.0.1:$PORT (logs in var/log/)"
"$PY" manage.py runserver "127.0.0.1:$PORT" &
pids+=($!)
wait "${pids[-1]}"
