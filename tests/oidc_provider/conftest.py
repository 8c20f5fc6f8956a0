from __future__ import annotations

import pytest

PLUGIN = "tests.plugins.oidc"


def pytest_configure(config: pytest.Config) -> None:
    # tests/conftest.py normally lists the plugin in pytest_plugins; load it here too so
    # this directory also runs on its own (e.g. with -p no:django before settings exist).
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.import_plugin(PLUGIN)
