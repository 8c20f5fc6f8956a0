"""``gpupaas notices``: what you were told about your workloads."""

from typing import Annotated

import typer

from gpupaas_cli import output
from gpupaas_cli.commands.common import JsonOpt, client, handles_errors

app = typer.Typer()


@app.command()
@handles_errors
def notices(
    unread: Annotated[bool, typer.Option("--unread", help="Only those not yet read.")] = False,
    mark_read: Annotated[
        bool, typer.Option("--mark-read", help="Then mark all of them read.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=200, help="How many.")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """What you were told: workloads that started, finished, failed or were preempted."""
    with client() as api:
        result = api.get(
            "/api/v1/notifications/", unread="true" if unread else None, page_size=limit
        )
        if mark_read:
            api.post("/api/v1/notifications/read/", {})
    if as_json:
        output.emit_json(result["results"])
        return
    if not result["results"]:
        typer.echo("No notices.")
        return
    typer.echo(
        output.table(
            ["WHEN", "EVENT", "TITLE", "READ"],
            [
                [
                    n["created"][:16].replace("T", " "),
                    n["event"],
                    n["title"],
                    "" if n["read_at"] is None else "yes",
                ]
                for n in result["results"]
            ],
        )
    )
