"""``gpupaas``: submit and follow GPU workloads from a terminal or a CI job.

The entry point: the commands live in :mod:`gpupaas_cli.commands`, a module per concern, and
are put together here in the order ``gpupaas --help`` lists them.

Exit codes (see ``gpupaas exit-codes``): 0 success, 1 server error, 2 usage, 3 not configured
or token refused, 4 not allowed, 5 not found, 6 request refused, 7 rate limited, 8 network,
9 watch timed out, 10 watched workload did not succeed.
"""

from __future__ import annotations

# First: it imports Typer without Rich (see its docstring).
from gpupaas_cli.commands import (  # isort: skip
    account,
    catalog,
    costs,
    endpoints,
    notices,
    policies,
    quotas,
    reservations,
    secrets,
    submit,
    sweeps,
    workloads,
)

import typer

from gpupaas_cli.commands.common import parse_gpus

__all__ = ["app", "parse_gpus"]

app = typer.Typer(
    name="gpupaas",
    help="Self-service GPUs: submit notebooks, jobs and sweeps; follow, stop and inspect them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# Commands of the top level, then groups of commands.
for commands in (
    account.app,
    workloads.app,
    sweeps.app,
    quotas.app,
    costs.app,
    notices.app,
    catalog.app,
):
    app.add_typer(commands)
app.add_typer(submit.app, name="submit")
app.add_typer(endpoints.app, name="endpoint")
app.add_typer(secrets.app, name="secret")
app.add_typer(policies.app, name="policy")
app.add_typer(costs.budget_app, name="budget")
app.add_typer(quotas.advice_app, name="advice")
app.add_typer(quotas.requests_app, name="quota-request")
app.add_typer(reservations.app, name="reservation")


if __name__ == "__main__":  # pragma: no cover
    app()
