#!/usr/bin/env bash
# Shared helpers for deploy/run.sh, deploy/test.sh and .ci/run. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

# Go lives here on these machines; kubesim is built with it.
[ -d /usr/local/go/bin ] && case ":$PATH:" in *":/usr/local/go/bin:"*) ;; *) PATH="$PATH:/usr/local/go/bin" ;; esac
export PATH

log() { printf '\033[1m[gpupaas]\033[0m %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    log "need root for: $*"; return 1; fi
}

# apt_install PKG... — installs Debian packages that are missing (needs root or sudo).
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# bootstrap_python — a virtualenv with the project and its CLI (the gpupaas-cli distribution
# in cli/, giving .venv/bin/gpupaas) installed in editable mode, redone when either
# pyproject.toml changes.
bootstrap_python() {
  local stamp="$VENV/.pyproject.sha256" want
  want="$(cat "$ROOT/pyproject.toml" "$ROOT/cli/pyproject.toml" | sha256sum | cut -d' ' -f1)"
  if [ ! -x "$PY" ]; then
    log "creating virtualenv $VENV"
    python3 -m venv "$VENV"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$VENV/bin/gpupaas" ]; then
    log "installing Python dependencies"
    # Quiet: setuptools' "Editable installation" notice is about layouts this project has not.
    PYTHONWARNINGS="ignore:Editable installation" "$PY" -m pip install -q --upgrade pip
    PYTHONWARNINGS="ignore:Editable installation" "$PY" -m pip install -q -e "$ROOT[dev]"
    PYTHONWARNINGS="ignore:Editable installation" "$PY" -m pip install -q -e "$ROOT/cli"
    echo "$want" > "$stamp"
  fi
}

# ensure_postgres — a running PostgreSQL with role/database gpupaas (password gpupaas).
ensure_postgres() {
  apt_install postgresql postgresql-client
  local ver
  ver="$(ls /usr/lib/postgresql | sort -V | tail -1)"
  if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
    as_root pg_createcluster "$ver" main >/dev/null
  fi
  local cluster
  cluster="$(pg_lsclusters -h | head -1 | awk '{print $1" "$2}')"
  if ! pg_lsclusters -h | head -1 | grep -q online; then
    log "starting PostgreSQL $cluster"
    # shellcheck disable=SC2086
    as_root pg_ctlcluster $cluster start
  fi
  as_root su postgres -c "psql -qtAc \"SELECT 1 FROM pg_roles WHERE rolname='gpupaas'\"" | grep -q 1 ||
    as_root su postgres -c "psql -qc \"CREATE ROLE gpupaas LOGIN CREATEDB PASSWORD 'gpupaas'\""
  as_root su postgres -c "psql -qtAc \"SELECT 1 FROM pg_database WHERE datname='gpupaas'\"" | grep -q 1 ||
    as_root su postgres -c "createdb -O gpupaas gpupaas"
}

# ensure_redis PORT DIR — a redis-server on 127.0.0.1:PORT (started if not answering). Sets
# REDIS_STARTED=1 when this call started it (stop_redis stops it again), 0 when one answered.
REDIS_STARTED=0
ensure_redis() {
  local port="$1" dir="$2"
  apt_install redis-server
  if redis-cli -p "$port" ping >/dev/null 2>&1; then REDIS_STARTED=0; return 0; fi
  mkdir -p "$dir"
  log "starting Redis on 127.0.0.1:$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --daemonize yes \
    --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --save "" --appendonly no
  REDIS_STARTED=1
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "Redis did not start; see $dir/redis.log"; return 1
}

# stop_redis PORT — stops the redis-server that ensure_redis started (one that was already
# answering belongs to someone else and keeps running).
stop_redis() {
  local port="$1"
  if [ "$REDIS_STARTED" = 1 ]; then
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    REDIS_STARTED=0
  fi
}

# ensure_node_deps — npm packages of the OpenID provider used in development and tests.
ensure_node_deps() {
  command -v node >/dev/null || apt_install nodejs npm
  if [ ! -d "$ROOT/deploy/oidc-provider/node_modules" ]; then
    log "installing the OpenID provider's npm packages"
    (cd "$ROOT/deploy/oidc-provider" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# ensure_helm — the helm command the chart tests use, built from its Go module on first use
# and cached in ~/.cache/gpupaas/helm/<version>/ (deploy/devtools/helm.py).
ensure_helm() {
  log "building (or reusing) helm"
  "$PY" -m deploy.devtools.helm build >/dev/null
}

# ensure_real_node_deps — Debian's containerd, runc, CNI plugins and iptables for kubesim's real
# nodes, and the tools to build the images they run (deploy/devtools/images.py).
ensure_real_node_deps() {
  apt_install containerd runc containernetworking-plugins iptables iproute2 conntrack catatonit python3-numpy \
    mmdebstrap buildah podman
}
