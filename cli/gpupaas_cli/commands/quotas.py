"""Quotas: ``quota`` (guarantees, limits and use), ``quota-request`` (more of a class for a
period, decided by leads or admins) and ``advice`` (right-sizing from measured usage)."""

from typing import Annotated, Any

import typer

from gpupaas_cli import output
from gpupaas_cli.commands.common import (
    CommentOpt,
    EndOpt,
    HoursOpt,
    JsonOpt,
    StartOpt,
    TeamOpt,
    TeamSlugOpt,
    client,
    handles_errors,
    parse_gpus,
    window,
)

app = typer.Typer()
advice_app = typer.Typer(
    help="Right-sizing advice for quotas from measured usage (platform admins).",
    no_args_is_help=True,
)

requests_app = typer.Typer(
    help="Ask for more of a GPU class for a period; leads decide per-user caps, admins team "
    "quotas. Approved grants start and end by themselves.",
    no_args_is_help=True,
)


def _request_line(r: dict[str, Any]) -> list[Any]:
    return [
        r["id"],
        r["team"],
        r["gpu_class"],
        r["kind"],
        output.gpus(r["amount_milli"]),
        r["starts_at"][:16],
        r["ends_at"][:16],
        r["state"],
        r["requested_by"],
    ]


def _print_request(r: dict[str, Any], as_json: bool) -> None:
    if as_json:
        output.emit_json(r)
        return
    typer.echo(
        f"Quota request #{r['id']}: {output.gpus(r['amount_milli'])} GPU of {r['gpu_class']} "
        f"for {r['team']} ({r['kind']}), {r['starts_at']} – {r['ends_at']}: {r['state']}."
    )
    if r.get("decision_comment"):
        typer.echo(f"Comment: {r['decision_comment']}")
    if r.get("capacity_note"):
        typer.echo(f"Note: {r['capacity_note']}")


@requests_app.command("ask")
@handles_errors
def grant_ask(
    team: Annotated[str, typer.Option(help="The team's slug.")],
    gpu_class: Annotated[str, typer.Option(help="e.g. H100-80GB")],
    gpus: Annotated[str, typer.Option(help="How many more GPUs, e.g. 16 or 0.5.")],
    why: Annotated[str, typer.Option(help="The justification whoever decides reads.")],
    start: StartOpt = None,
    end: EndOpt = None,
    hours: HoursOpt = None,
    for_me: Annotated[
        bool, typer.Option(help="A higher per-user cap for you (leads decide), not the team.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Ask for more of a class for a period."""
    begin, finish = window(start, end, hours)
    body = {
        "team": team,
        "gpu_class": gpu_class,
        "kind": "user" if for_me else "team",
        "amount_milli": parse_gpus(gpus),
        "starts_at": begin,
        "ends_at": finish,
        "justification": why,
    }
    with client() as api:
        result = api.request("POST", "/api/v1/quota-requests/", json=body)
    _print_request(result, as_json)


@requests_app.command("list")
@handles_errors
def grant_list(
    team: TeamOpt = None,
    state: Annotated[str | None, typer.Option(help="pending, approved, rejected…")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Quota requests of your teams (admins: all), newest first."""
    with client() as api:
        rows = api.get("/api/v1/quota-requests/", team=team, state=state)
    if as_json:
        output.emit_json(rows)
        return
    if not rows:
        typer.echo("No quota requests.")
        return
    headers = ["ID", "TEAM", "GPU CLASS", "KIND", "GPU", "FROM", "UNTIL", "STATE", "BY"]
    typer.echo(output.table(headers, [_request_line(r) for r in rows]))


def _decide_request(request_id: int, approve: bool, comment: str, as_json: bool) -> None:
    with client() as api:
        result = api.post(
            f"/api/v1/quota-requests/{request_id}/decide/",
            {"approve": approve, "comment": comment},
        )
    _print_request(result, as_json)


@requests_app.command("approve")
@handles_errors
def grant_approve(request_id: int, comment: CommentOpt = "", as_json: JsonOpt = False) -> None:
    """Approve a pending request: the grant starts and ends by itself."""
    _decide_request(request_id, True, comment, as_json)


@requests_app.command("reject")
@handles_errors
def grant_reject(request_id: int, comment: CommentOpt = "", as_json: JsonOpt = False) -> None:
    """Reject a pending request."""
    _decide_request(request_id, False, comment, as_json)


@requests_app.command("withdraw")
@handles_errors
def grant_withdraw(request_id: int, as_json: JsonOpt = False) -> None:
    """Withdraw a pending request."""
    with client() as api:
        result = api.post(f"/api/v1/quota-requests/{request_id}/cancel/")
    _print_request(result, as_json)


@app.command()
@handles_errors
def quota(team: TeamOpt = None, as_json: JsonOpt = False) -> None:
    """Your teams' quotas and what is used of them, in GPUs."""
    with client() as api:
        rows = api.get("/api/v1/quotas/", team=team)
    if as_json:
        output.emit_json(rows)
        return
    if not rows:
        typer.echo("No quotas.")
        return
    typer.echo(
        output.table(
            ["TEAM", "GPU CLASS", "USED", "GUARANTEED", "LIMIT", "BORROWED", "FREE"],
            [
                [
                    r["team"],
                    r["gpu_class"],
                    output.gpus(r["used_milli"]),
                    output.gpus(r["guaranteed_milli"]),
                    output.gpus(r["limit_milli"]),
                    output.gpus(r["borrowed_milli"]),
                    output.gpus(r["free_milli"]),
                ]
                for r in rows
            ],
        )
    )


DaysOpt = Annotated[int, typer.Option(help="Days of measured usage to look at.")]


@advice_app.command("list")
@handles_errors
def advice_list(days: DaysOpt = 14, as_json: JsonOpt = False) -> None:
    """Suggested guarantee and limit per team and class, with the evidence, in GPUs."""
    with client() as api:
        rows = api.get("/api/v1/advice/", days=days)
    if as_json:
        output.emit_json(rows)
        return
    if not rows:
        typer.echo("No quotas.")
        return
    typer.echo(
        output.table(
            ["TEAM", "GPU CLASS", "NOW", "SUGGESTED", "USED/HELD GPU-H", "P95 USED", "P95 HELD"],
            [
                [
                    r["team"],
                    r["gpu_class"],
                    f"{output.gpus(r['guaranteed_milli'])}-{output.gpus(r['limit_milli'])}",
                    "-"
                    if r["suggested_guaranteed_milli"] is None
                    else f"{output.gpus(r['suggested_guaranteed_milli'])}-"
                    f"{output.gpus(r['suggested_limit_milli'])}",
                    f"{r['used_gpu_hours']:.0f}/{r['allocated_gpu_hours']:.0f}",
                    output.gpus(r["p95_used_milli"]),
                    output.gpus(r["p95_allocated_milli"]),
                ]
                for r in rows
            ],
        )
    )


@advice_app.command("apply")
@handles_errors
def advice_apply(
    team: TeamSlugOpt,
    gpu_class: Annotated[str, typer.Option("--class", help="The GPU class.")],
    days: DaysOpt = 14,
    as_json: JsonOpt = False,
) -> None:
    """Set the team's quota of the class to the advice (platform admins; audited)."""
    with client() as api:
        r = api.post("/api/v1/advice/apply/", {"team": team, "gpu_class": gpu_class, "days": days})
    if as_json:
        output.emit_json(r)
    else:
        typer.echo(
            f"{r['team']} on {r['gpu_class']}: {output.gpus(r['guaranteed_milli'])} GPU "
            f"guaranteed, limit {output.gpus(r['limit_milli'])} GPU. {r['reason']}"
        )
