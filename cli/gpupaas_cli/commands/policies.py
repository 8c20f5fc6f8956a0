"""``gpupaas policy``: what a team may ask for beyond its quota (set by platform admins)."""

from typing import Annotated, Any

import typer

from gpupaas_cli import output, spec
from gpupaas_cli.commands.common import JsonOpt, TeamSlugOpt, client, handles_errors

app = typer.Typer(
    help="A team's policy: classes, images, size and runtime caps (set by platform admins).",
    no_args_is_help=True,
)

PER_KIND = ("notebook", "training", "sweep")


def _per_kind(items: list[str] | None, what: str) -> dict[str, int]:
    """``KIND=DURATION`` pairs (``training=48h``) as seconds per kind."""
    result = {}
    for kind, text in spec.parse_pairs(items or [], what).items():
        if kind not in PER_KIND:
            raise spec.SpecError(f"{what}: the kind is one of {', '.join(PER_KIND)}, not {kind}.")
        result[kind] = spec.duration_seconds(text, what)
    return result


def _policy_text(p: dict[str, Any]) -> str:
    lines = p.get("summary") or []
    return "\n".join(lines) if lines else "No restrictions."


@app.command("show")
@handles_errors
def policy_show(team: TeamSlugOpt, as_json: JsonOpt = False) -> None:
    """What the team may ask for beyond its quota."""
    with client() as api:
        result = api.get(f"/api/v1/teams/{team}/policy/")
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(_policy_text(result))


@app.command("set")
@handles_errors
def policy_set(
    team: TeamSlugOpt,
    gpu_class: Annotated[
        list[str] | None, typer.Option("--class", help="An allowed GPU class (repeat).")
    ] = None,
    image: Annotated[list[str] | None, typer.Option(help="An allowed image (repeat).")] = None,
    max_gpus: Annotated[
        str | None, typer.Option(help="GPUs one workload may hold at once, e.g. 4 or 0.5.")
    ] = None,
    max_runtime: Annotated[
        list[str] | None, typer.Option(help="KIND=DURATION, e.g. training=48h (repeat).")
    ] = None,
    idle_timeout: Annotated[
        list[str] | None, typer.Option(help="KIND=DURATION default, e.g. notebook=30m (repeat).")
    ] = None,
    exclusive_class: Annotated[
        list[str] | None,
        typer.Option(help="A class on which the team shares no GPU with other teams (repeat)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replace the team's policy (platform admins); what is left out restricts nothing."""
    body = {
        "allowed_classes": gpu_class or [],
        "allowed_images": image or [],
        "max_gpu_milli_per_workload": spec.gpus_to_milli(max_gpus) if max_gpus else None,
        "max_runtime_seconds": _per_kind(max_runtime, "max-runtime"),
        "default_idle_timeout_seconds": _per_kind(idle_timeout, "idle-timeout"),
        "exclusive_classes": exclusive_class or [],
    }
    with client() as api:
        result = api.request("PUT", f"/api/v1/teams/{team}/policy/", json=body)
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(f"Policy of {team} saved.\n{_policy_text(result)}")
