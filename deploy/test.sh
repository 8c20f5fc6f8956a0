#!/usr/bin/env bash
# The whole test suite: lint, types, then pytest on PostgreSQL with the real parts
# (Redis, the simulated cluster, the OpenID provider, Chromium). Extra arguments go to pytest.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bootstrap_python
ensure_postgres
apt_install redis-server chromium prometheus
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
"$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"

# The orchestration tests on the simulated cluster once more, with the portal holding the Helm
# chart's ServiceAccount token instead of the admin's (tests/plugins/kubesim.py).
if [ $# -eq 0 ]; then
  log "pytest: orchestration as the chart's ServiceAccount"
  KUBESIM_IDENTITY=chart K8S_PORTAL_SERVICE_ACCOUNT=gpupaas/gpupaas K8S_PORTAL_TEAM_ROLE=gpupaas-team \
    "$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup -m kubesim tests/orchestration
fi
