"""What GPUs cost: ``usage`` (GPU-hours and their cost) and ``budget`` (a team's monthly
budget, spend, run rate and forecast). Every amount is printed with its currency."""

from typing import Annotated, Any

import typer

from gpupaas_cli import output
from gpupaas_cli.commands.common import JsonOpt, TeamOpt, TeamSlugOpt, client, handles_errors

app = typer.Typer()
budget_app = typer.Typer(
    help="A team's monthly budget: spend, run rate, forecast, thresholds, hard stop.",
    no_args_is_help=True,
)


@app.command()
@handles_errors
def usage(
    team: TeamOpt = None,
    month: Annotated[str | None, typer.Option(help="YYYY-MM; default: this month.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """GPU-hours allocated and used, and their cost: yours, or a team's with --team."""
    path = f"/api/v1/teams/{team}/usage/" if team else "/api/v1/usage/"
    with client() as api:
        result = api.get(path, month=month)
    if as_json:
        output.emit_json(result)
        return
    typer.echo(f"{result['start']} to {result['end']} (exclusive)")
    typer.echo(
        output.table(
            [
                "TEAM",
                "OWNER",
                "GPU CLASS",
                "ALLOCATED H",
                "USED H",
                "UTIL",
                output.cost_header("COST", result.get("currency")),
            ],
            [
                [
                    r["team"],
                    r["owner"],
                    r["gpu_class"],
                    f"{r['allocated_gpu_hours']:.1f}",
                    f"{r['used_gpu_hours']:.1f}",
                    "-" if r["utilisation"] is None else f"{100 * r['utilisation']:.0f}%",
                    r["cost"],
                ]
                for r in result["rows"]
            ],
        )
    )


def _budget_text(b: dict[str, Any]) -> str:
    if b["amount"] is None:
        return f"{b['team']} has no budget for {b['month']}."

    def money(amount: Any) -> str:
        return output.money(amount, b.get("currency"))

    stop = "on" if b["hard_stop"] else "off"
    if b["stopping"]:
        stop += ": spent; new work only in the batch class or with a lead's approval"
    elif b["stop_lifted"]:
        stop += " (a lead approved more work this month)"
    return "\n".join(
        [
            f"Budget of {b['team']} for {b['month']}: {money(b['amount'])}",
            f"Spent: {money(b['spent'])}   run rate: {money(b['run_rate_per_hour'])}/h",
            f"Forecast for the month: {money(b['forecast'])}",
            f"Warnings at: {', '.join(f'{t}%' for t in b['thresholds']) or 'none'}",
            f"Hard stop: {stop}",
        ]
    )


@budget_app.command("show")
@handles_errors
def budget_show(
    team: TeamSlugOpt,
    month: Annotated[str | None, typer.Option(help="YYYY-MM; default: this month.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The team's budget, spend so far and the forecast for the month."""
    with client() as api:
        result = api.get(f"/api/v1/teams/{team}/budget/", month=month)
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(_budget_text(result))


@budget_app.command("set")
@handles_errors
def budget_set(
    team: TeamSlugOpt,
    amount: Annotated[str, typer.Option(help="In the platform currency, e.g. 40000.")],
    month: Annotated[str | None, typer.Option(help="YYYY-MM it holds from.")] = None,
    threshold: Annotated[
        list[int] | None, typer.Option(help="Percent at which leads and admins are told (repeat).")
    ] = None,
    hard_stop: Annotated[
        bool, typer.Option(help="Once spent, admit only batch work or a lead's.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Set the team's budget (platform admins)."""
    body: dict[str, Any] = {"amount": amount, "hard_stop": hard_stop}
    if month:
        body["month"] = month
    if threshold:
        body["thresholds"] = threshold
    with client() as api:
        result = api.request("PUT", f"/api/v1/teams/{team}/budget/", json=body)
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(_budget_text(result))


@budget_app.command("approve")
@handles_errors
def budget_approve(team: TeamSlugOpt, as_json: JsonOpt = False) -> None:
    """Approve more work this month despite the hard stop (leads)."""
    with client() as api:
        result = api.post(f"/api/v1/teams/{team}/budget/approve/")
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(_budget_text(result))
