#!/usr/bin/env bash
# The whole test suite: lint, types, then pytest on PostgreSQL with the real parts
# (Redis, the simulated cluster, the OpenID provider, Chromium). Extra arguments go to pytest.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

bootstrap_python
ensure_postgres
apt_install redis-server chromium prometheus
ensure_node_deps

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
