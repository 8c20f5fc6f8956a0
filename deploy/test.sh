#!/usr/bin/env bash
# The whole test suite: lint, types, then pytest on PostgreSQL with the real parts
# (Redis, the simulated cluster, the OpenID provider, Chromium). Extra arguments go to pytest.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bootstrap_python
ensure_postgres
apt_install redis-server chromium prometheus
ensure_real_node_deps
ensure_node_deps
ensure_helm

log "ruff"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
log "mypy"
"$VENV/bin/mypy" gpupaas apps cli/gpupaas_cli deploy/devtools
log "import contracts (layers, Kubernetes in orchestration only, pure cores)"
"$VENV/bin/lint-imports"

export DATABASE_URL="${TEST_DATABASE_URL:-postgres://gpupaas:gpupaas@127.0.0.1:5432/gpupaas}"
log "pytest"
if [ $# -eq 0 ]; then
  # Everything but the real-node journey, on fake nodes (the journey has its own pass below).
  "$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup -m "not realnode"
else
  "$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
fi

# The orchestration tests on the simulated cluster once more, with the portal holding the Helm
# chart's ServiceAccount token instead of the admin's (tests/plugins/kubesim.py).
if [ $# -eq 0 ]; then
  log "pytest: orchestration as the chart's ServiceAccount"
  KUBESIM_IDENTITY=chart K8S_PORTAL_SERVICE_ACCOUNT=gpupaas/gpupaas K8S_PORTAL_TEAM_ROLE=gpupaas-team \
    "$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup -m "kubesim and not realnode" tests/orchestration

  # What users do, on real nodes: pods that really run (tests/realnode). Each pytest worker
  # starts a cluster with real nodes (deploy/kubesim/topologies/realnodes.yaml); one worker by
  # default: a cluster's kubelets take most of the 128 inotify instances a user may hold.
  log "pytest: the real-node journey (KUBESIM_REAL_NODES=1)"
  started=$(date +%s)
  KUBESIM_REAL_NODES=1 "$VENV/bin/pytest" -n "${REALNODE_WORKERS:-1}" --dist loadgroup -m realnode tests/realnode
  log "real-node pass took $(( $(date +%s) - started ))s"
fi
