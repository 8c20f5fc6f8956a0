"""``gpupaas reservation``: GPUs of a class booked for a time window, held for the team then."""

from datetime import UTC, datetime
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
    client,
    handles_errors,
    parse_gpus,
    parse_when,
    window,
)

app = typer.Typer(
    help="Book GPUs of a class for a time window; the capacity is held for the team then.",
    no_args_is_help=True,
)


def _print_reservation(r: dict[str, Any], as_json: bool) -> None:
    if as_json:
        output.emit_json(r)
        return
    amount = (
        f"{r['count']} GPU"
        if r["size_milli"] == 1000
        else f"{r['count']} × {output.gpus(r['size_milli'])} GPU"
    )
    typer.echo(
        f"Reservation #{r['id']}: {amount} of {r['gpu_class']} for {r['team']}, "
        f"{r['starts_at']} – {r['ends_at']}: {r['state']}."
    )
    if "reserved_gpu_hours" in r:
        typer.echo(
            f"Held {r['reserved_gpu_hours']} GPU-hours so far, used {r['used_gpu_hours']}, "
            f"unused {r['unused_gpu_hours']}."
        )


@app.command("book")
@handles_errors
def reservation_book(
    team: Annotated[str, typer.Option(help="The team's slug.")],
    gpu_class: Annotated[str, typer.Option(help="e.g. H100-80GB")],
    count: Annotated[int, typer.Option(help="How many GPUs (or units of --size).")],
    size: Annotated[
        str, typer.Option(help="One unit in GPUs: 1, or a fraction such as 0.25 for notebooks.")
    ] = "1",
    start: StartOpt = None,
    end: EndOpt = None,
    hours: HoursOpt = None,
    note: Annotated[str, typer.Option(help="What it is for.")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Book capacity for a window (leads); big bookings wait for an admin."""
    begin, finish = window(start, end, hours)
    body = {
        "team": team,
        "gpu_class": gpu_class,
        "count": count,
        "size_milli": parse_gpus(size),
        "starts_at": begin,
        "ends_at": finish,
        "note": note,
    }
    with client() as api:
        result = api.request("POST", "/api/v1/reservations/", json=body)
    _print_reservation(result, as_json)


@app.command("list")
@handles_errors
def reservation_list(
    team: TeamOpt = None,
    state: Annotated[str | None, typer.Option(help="pending, approved, rejected…")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Reservations of your teams (admins: all), latest first."""
    with client() as api:
        rows = api.get("/api/v1/reservations/", team=team, state=state)
    if as_json:
        output.emit_json(rows)
        return
    if not rows:
        typer.echo("No reservations.")
        return
    typer.echo(
        output.table(
            ["ID", "TEAM", "GPU CLASS", "GPU", "FROM", "UNTIL", "STATE", "NOTE"],
            [
                [
                    r["id"],
                    r["team"],
                    r["gpu_class"],
                    output.gpus(r["total_milli"]),
                    r["starts_at"][:16],
                    r["ends_at"][:16],
                    r["state"],
                    r["note"][:40],
                ]
                for r in rows
            ],
        )
    )


@app.command("show")
@handles_errors
def reservation_show(reservation_id: int, as_json: JsonOpt = False) -> None:
    """One reservation, with the GPU-hours held and used so far."""
    with client() as api:
        result = api.get(f"/api/v1/reservations/{reservation_id}/")
    _print_reservation(result, as_json)


@app.command("calendar")
@handles_errors
def reservation_calendar(
    gpu_class: Annotated[str, typer.Option(help="e.g. H100-80GB")],
    start: StartOpt = None,
    hours: Annotated[int, typer.Option(help="How many hours to show.")] = 24,
    as_json: JsonOpt = False,
) -> None:
    """Free and booked GPUs of a class per hour."""
    begin = parse_when(start, default=datetime.now(UTC)).isoformat()
    with client() as api:
        rows = api.get(
            "/api/v1/reservations/calendar/", gpu_class=gpu_class, start=begin, hours=hours
        )
    if as_json:
        output.emit_json(rows)
        return
    typer.echo(
        output.table(
            ["HOUR (UTC)", "FREE", "BOOKED"],
            [
                [r["start"][:16], output.gpus(r["free_milli"]), output.gpus(r["booked_milli"])]
                for r in rows
            ],
        )
    )


def _decide_reservation(reservation_id: int, approve: bool, comment: str, as_json: bool) -> None:
    with client() as api:
        result = api.post(
            f"/api/v1/reservations/{reservation_id}/decide/",
            {"approve": approve, "comment": comment},
        )
    _print_reservation(result, as_json)


@app.command("approve")
@handles_errors
def reservation_approve(
    reservation_id: int, comment: CommentOpt = "", as_json: JsonOpt = False
) -> None:
    """Approve a booking that waits (platform admins)."""
    _decide_reservation(reservation_id, True, comment, as_json)


@app.command("reject")
@handles_errors
def reservation_reject(
    reservation_id: int, comment: CommentOpt = "", as_json: JsonOpt = False
) -> None:
    """Reject a booking that waits (platform admins)."""
    _decide_reservation(reservation_id, False, comment, as_json)


@app.command("withdraw")
@handles_errors
def reservation_withdraw(reservation_id: int, as_json: JsonOpt = False) -> None:
    """Withdraw a booking; an open window closes now."""
    with client() as api:
        result = api.post(f"/api/v1/reservations/{reservation_id}/cancel/")
    _print_reservation(result, as_json)
