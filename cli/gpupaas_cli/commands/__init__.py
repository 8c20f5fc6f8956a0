"""The commands of ``gpupaas``, one module per concern; :mod:`gpupaas_cli.main` puts them
together.

Typer is imported here without Rich (:mod:`gpupaas_cli.lean`), before any command module
imports it: help and usage errors are then Click's plain text. ``GPUPAAS_RICH=1`` keeps Rich's
panels and colours.

The command modules leave out ``from __future__ import annotations`` on purpose: Typer reads
every command's signature each time ``gpupaas`` starts, and annotations kept as strings cost
an ``eval`` each, about a third of building the commands.
"""

from __future__ import annotations

import os

from gpupaas_cli import lean

with lean.hidden(*(() if os.environ.get("GPUPAAS_RICH") == "1" else ("rich",))):
    import typer  # noqa: F401
