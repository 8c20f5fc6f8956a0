"""What every command shares: the error handler and exit codes, the API client, the options
several commands take, and parsers of GPU amounts and times."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from gpupaas_cli import exits, output, spec
from gpupaas_cli.client import ApiError, NetworkError
from gpupaas_cli.config import ConfigError, load

if TYPE_CHECKING:
    from gpupaas_cli.client import Client

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TeamOpt = Annotated[str | None, typer.Option(help="Team slug (needed if you are in several).")]
TeamSlugOpt = Annotated[str, typer.Option(help="The team's slug.")]
NameOpt = Annotated[str | None, typer.Option("--name", "-n", help="A name for it.")]
ImageOpt = Annotated[str | None, typer.Option(help="Image name (see `gpupaas images`).")]
EnvOpt = Annotated[list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE (repeat).")]
KeyOpt = Annotated[
    str | None,
    typer.Option(help="Idempotency-Key: the same key never submits twice (default: random)."),
]
ConfirmOpt = Annotated[
    bool,
    typer.Option(
        "--confirm-preemption",
        help="Submit even though starting it preempts running work of yours or your teammates.",
    ),
]
StartOpt = Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset); default: now.")]
EndOpt = Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset).")]
HoursOpt = Annotated[float | None, typer.Option(help="Or: how long from the start, in hours.")]
CommentOpt = Annotated[str, typer.Option(help="Told to whoever asked, and audited.")]


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def handles_errors(func: F) -> F:
    """Turn API, network and configuration errors into a message and the documented exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ApiError as exc:
            for name, messages in exc.fields.items():
                if name != "non_field_errors":
                    typer.echo(f"  {name}: {' '.join(messages)}", err=True)
            if exc.would_preempt:
                typer.echo("It would preempt:", err=True)
                for victim in exc.would_preempt:
                    typer.echo(f"  {output.victim_line(victim)}", err=True)
                typer.echo("Run it again with --confirm-preemption to go ahead.", err=True)
            raise fail(exc.message, exc.exit_code) from None
        except NetworkError as exc:
            raise fail(str(exc), exits.NETWORK) from None
        except ConfigError as exc:
            raise fail(str(exc), exits.AUTH) from None
        except spec.SpecError as exc:
            raise fail(str(exc), exits.USAGE) from None
        except KeyboardInterrupt:
            raise typer.Exit(exits.INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def client() -> Client:
    """A client for the configured server (httpx is imported here, by the first command that
    talks to the server)."""
    from gpupaas_cli.client import Client

    return Client(load())


def act(workload_id: int, action: str, body: dict[str, Any] | None, as_json: bool) -> None:
    """POST one of a workload's actions (cancel, suspend, scale …) and print its new state."""
    with client() as api:
        workload = api.post(f"/api/v1/workloads/{workload_id}/{action}/", body)
    if as_json:
        output.emit_json(workload)
    else:
        typer.echo(f"#{workload['id']} {workload['name']}: {workload['state']}")


def parse_gpus(text: str) -> int:
    """'16' → 16000, '0.25' → 250 (milli-GPU); a usage error for anything else."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise fail(f"Not a number of GPUs: {text!r}.", exits.USAGE) from None
    milli = value * 1000
    if not value.is_finite() or value <= 0 or milli != milli.to_integral_value():
        raise fail(f"Give a positive number of GPUs, at most 3 decimals: {text!r}.", exits.USAGE)
    return int(milli)


def parse_when(text: str | None, *, default: datetime | None = None) -> datetime:
    """ISO 8601 ('2026-03-02', '2026-03-02T09:00', with or without an offset; UTC if none)."""
    if not text:
        if default is None:
            raise fail("Give a time.", exits.USAGE)
        return default
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        message = f"Not a time (use ISO 8601, e.g. 2026-03-02T09:00): {text!r}."
        raise fail(message, exits.USAGE) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def window(start: str | None, end: str | None, hours: float | None) -> tuple[str, str]:
    begin = parse_when(start, default=datetime.now(UTC))
    if (end is None) == (hours is None):
        raise fail("Give either --end or --hours.", exits.USAGE)
    finish = parse_when(end) if end else begin + timedelta(hours=hours or 0)
    return begin.isoformat(), finish.isoformat()
