"""``gpupaas secret``: team and personal secrets, written once and never shown back."""

from typing import Annotated

import typer

from gpupaas_cli import output, spec
from gpupaas_cli.commands.common import JsonOpt, client, handles_errors

app = typer.Typer(
    help="Team and personal secrets (tokens, keys): written once, never shown back; requests "
    "refer to them with --secret NAME[:ENV[=KEY]].",
    no_args_is_help=True,
)
SecretTeamOpt = Annotated[str, typer.Option(help="The team's slug.")]
ScopeOpt = Annotated[
    str | None,
    typer.Option(help="team or personal, when a team secret and yours share the name."),
]


@app.command("create")
@handles_errors
def secret_create(
    name: Annotated[str, typer.Argument(help="e.g. hf or wandb")],
    team: SecretTeamOpt,
    personal: Annotated[bool, typer.Option(help="Yours only; else a team secret (leads).")] = False,
    from_literal: Annotated[
        list[str] | None, typer.Option(help="KEY=VALUE (repeat); visible in shell history.")
    ] = None,
    from_file: Annotated[
        list[str] | None, typer.Option(help="KEY=PATH (repeat): the file's content.")
    ] = None,
    rotate: Annotated[bool, typer.Option(help="Replace the values of an existing secret.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Create (or with --rotate, replace the values of) a secret in a team's namespace."""
    data = spec.parse_secret_data(from_literal or [], from_file or [])
    with client() as api:
        if rotate:
            scope = "personal" if personal else "team"
            result = api.request(
                "PUT",
                f"/api/v1/teams/{team}/secrets/{name}/",
                json={"data": data},
                params={"scope": scope},
            )
        else:
            body = {"name": name, "personal": personal, "data": data}
            result = api.request("POST", f"/api/v1/teams/{team}/secrets/", json=body)
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(
            f"Secret {result['name']} ({result['scope']}) saved in {team} with keys "
            f"{', '.join(result['keys'])}; its values are not shown again."
        )


@app.command("list")
@handles_errors
def secret_list(team: SecretTeamOpt, as_json: JsonOpt = False) -> None:
    """The team's secrets and your own: names, scopes, keys; never values."""
    with client() as api:
        rows = api.get(f"/api/v1/teams/{team}/secrets/")
    if as_json:
        output.emit_json(rows)
        return
    if not rows:
        typer.echo("No secrets.")
        return
    typer.echo(
        output.table(
            ["NAME", "SCOPE", "KEYS", "UPDATED"],
            [[r["name"], r["scope"], ",".join(r["keys"]), r["updated_at"]] for r in rows],
        )
    )


@app.command("delete")
@handles_errors
def secret_delete(name: str, team: SecretTeamOpt, scope: ScopeOpt = None) -> None:
    """Delete a secret; workloads that refer to it will not start."""
    with client() as api:
        api.request(
            "DELETE",
            f"/api/v1/teams/{team}/secrets/{name}/",
            params={"scope": scope} if scope else None,
        )
    typer.echo(f"Secret {name} deleted.")
