from __future__ import annotations

from tests.cli.conftest import cli_for as cli_for  # the CLI against the live server
from tests.workloads.test_request_matrix import world as world  # the request matrix's catalog

__all__ = ["cli_for", "world"]
