from __future__ import annotations

pytest_plugins = [
    "tests.plugins.cast",
    "tests.plugins.redis_server",
    "tests.plugins.oidc",
    "tests.plugins.kubesim",
    "tests.plugins.prometheus",
    "tests.plugins.browser",
    "tests.plugins.fuzz",
    "tests.plugins.receivers",
]
