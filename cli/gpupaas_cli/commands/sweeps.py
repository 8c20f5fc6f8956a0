"""A sweep's trials; submitting a sweep is ``gpupaas submit sweep``."""

import shlex

import typer

from gpupaas_cli import output
from gpupaas_cli.commands.common import JsonOpt, client, handles_errors

app = typer.Typer()


@app.command()
@handles_errors
def trials(workload_id: int, as_json: JsonOpt = False) -> None:
    """A sweep's trials: parameters, the command each runs, state, exit code, runtime and the
    last metrics line (while a trial runs: the latest it printed)."""
    with client() as api:
        result = api.get(f"/api/v1/workloads/{workload_id}/trials/")
    if as_json:
        output.emit_json(result)
        return
    sweep = result["sweep"]
    typer.echo(f"{sweep['name']} (#{sweep['id']}): {sweep['state']}. {sweep['last_reason']}")
    rows = [
        [
            t["index"],
            " ".join(f"{k}={v}" for k, v in t["params"].items()),
            shlex.join([*t.get("command", []), *t.get("args", [])]) or "-",
            t["state"],
            "-" if t["exit_code"] is None else t["exit_code"],
            "-" if t["runtime_seconds"] is None else f"{t['runtime_seconds']}s",
            t["last_metrics_line"] or "-",
        ]
        for t in result["trials"]
    ]
    typer.echo(
        output.table(["#", "PARAMS", "COMMAND", "STATE", "EXIT", "RUNTIME", "METRICS"], rows)
    )
