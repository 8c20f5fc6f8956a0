"""What is on offer: ``gpus`` (GPU classes, free capacity, hourly cost) and ``images``."""

from typing import Annotated

import typer

from gpupaas_cli import output
from gpupaas_cli.commands.common import JsonOpt, client, handles_errors

app = typer.Typer()


@app.command("gpus")
@handles_errors
def gpu_classes(as_json: JsonOpt = False) -> None:
    """GPU classes on offer with their free capacity."""
    with client() as api:
        rows = api.get("/api/v1/gpu-classes/")
    if as_json:
        output.emit_json(rows)
        return
    currency = rows[0].get("currency") if rows else None
    typer.echo(
        output.table(
            [
                "CLASS",
                "MEMORY",
                "SHARING",
                "FREE",
                "CAPACITY",
                output.cost_header("COST/H", currency),
            ],
            [
                [
                    r["name"],
                    f"{r['memory_mib'] // 1024} GiB",
                    r["sharing_mode"],
                    output.gpus(r["free_milli"]),
                    output.gpus(r["capacity_milli"]),
                    r["hourly_cost"],
                ]
                for r in rows
            ],
        )
    )


@app.command()
@handles_errors
def images(
    gpu_class: Annotated[
        str | None, typer.Option(help="Where on the nodes of this GPU class only.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Images on offer, and the clusters whose nodes hold them."""
    with client() as api:
        rows = api.get("/api/v1/images/", gpu_class=gpu_class)
    if as_json:
        output.emit_json(rows)
        return
    typer.echo(
        output.table(
            ["NAME", "KIND", "REFERENCE", "CLUSTERS"],
            [[r["name"], r["kind"], r["reference"], output.image_clusters(r)] for r in rows],
        )
    )
