"""Signing in: ``configure`` (the server and a token), ``whoami``, and the exit codes."""

from typing import Annotated

import typer

from gpupaas_cli import exits, output
from gpupaas_cli.commands.common import JsonOpt, client, handles_errors
from gpupaas_cli.config import Config, config_path, normalise_url, save

app = typer.Typer()


@app.command()
@handles_errors
def configure(
    url: Annotated[str, typer.Option(help="The portal's address, e.g. https://gpu.example.com")],
    token: Annotated[
        str | None,
        typer.Option(help="A personal API token (gpp_…); asked for when left out."),
    ] = None,
    verify: Annotated[bool, typer.Option(help="Check the token against the server.")] = True,
) -> None:
    """Store the server URL and your token (in a file only you can read)."""
    secret = token or typer.prompt("API token", hide_input=True)
    config = Config(url=normalise_url(url), token=secret.strip())
    if verify:
        from gpupaas_cli.client import Client

        with Client(config) as api:
            me = api.get("/api/v1/me/")
        typer.echo(f"Signed in as {me['username']}.")
    path = save(config)
    typer.echo(f"Saved to {path} (readable by you only).")


@app.command()
@handles_errors
def whoami(as_json: JsonOpt = False) -> None:
    """Who the token belongs to, and their teams."""
    with client() as api:
        me = api.get("/api/v1/me/")
    if as_json:
        output.emit_json(me)
        return
    typer.echo(f"{me['username']}{' (admin)' if me['is_admin'] else ''}")
    for team in me["teams"]:
        typer.echo(f"  {team['slug']}  {team['role']}")


@app.command("exit-codes")
def exit_codes() -> None:
    """List the exit codes scripts can rely on."""
    for code, meaning in sorted(exits.TABLE.items()):
        typer.echo(f"{code:>3}  {meaning}")


@app.command("config-path", hidden=True)
def show_config_path() -> None:
    typer.echo(str(config_path()))
