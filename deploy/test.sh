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
"$VENV/bin/mypy" gpupaas apps cli/gpupaas_cli

export DATABASE_URL="${TEST_DATABASE_URL:-postgres://gpupaas:gpupaas@127.0.0.1:5432/gpupaas}"
log "pytest"
"$VENV/bin/pytest" -n "${PYTEST_WORKERS:-2}" --dist loadgroup "$@"
