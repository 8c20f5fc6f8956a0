"""A workload's life after it was submitted: ``list``, ``status`` (``--watch``), ``logs``,
``events``, ``cancel``, ``suspend`` and ``resume`` (notebooks), and ``clone`` (``--edit``: in
your editor first)."""

import os
import shlex
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from gpupaas_cli import exits, output, spec
from gpupaas_cli.commands.common import (
    ConfirmOpt,
    JsonOpt,
    KeyOpt,
    NameOpt,
    TeamOpt,
    act,
    client,
    fail,
    handles_errors,
)
from gpupaas_cli.commands.submit import send

app = typer.Typer()
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}


@app.command("list")
@handles_errors
def list_(
    state: Annotated[str | None, typer.Option(help="e.g. running or queued,pending")] = None,
    kind: Annotated[str | None, typer.Option(help="notebook, training or sweep")] = None,
    team: TeamOpt = None,
    mine: Annotated[bool, typer.Option("--mine", help="Only my own workloads.")] = False,
    search: Annotated[
        str | None, typer.Option(help="Part of the name, image, command or arguments.")
    ] = None,
    since: Annotated[str | None, typer.Option(help="Created on or after, YYYY-MM-DD.")] = None,
    until: Annotated[str | None, typer.Option(help="Created on or before, YYYY-MM-DD.")] = None,
    sort: Annotated[
        str | None, typer.Option(help="-created (default), created, name, -name, state, kind.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="Rows per page.")] = 50,
    page: Annotated[int, typer.Option(min=1)] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Workloads of your teams, newest first."""
    with client() as api:
        result = api.get(
            "/api/v1/workloads/",
            state=state,
            kind=kind,
            team=team,
            owner="me" if mine else None,
            search=search,
            created_from=since,
            created_to=until,
            sort=sort,
            page_size=limit,
            page=page,
        )
    if as_json:
        output.emit_json(result["results"])
        return
    if not result["results"]:
        typer.echo("No workloads.")
        return
    typer.echo(output.workloads_table(result["results"]))
    shown = (page - 1) * limit + len(result["results"])
    if result["count"] > shown:
        typer.echo(f"({shown} of {result['count']}; --page {page + 1} for more)")


@app.command()
@handles_errors
def status(
    workload_id: Annotated[int, typer.Argument(help="The workload's id.")],
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow until it ends.")] = False,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between polls.")] = 2.0,
    timeout: Annotated[
        float | None, typer.Option(help="With --watch: give up after this many seconds.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a workload. With --watch, print each change until it ends; the exit code is 0 if
    it succeeded and 10 if it failed, was cancelled or expired."""
    with client() as api:
        path = f"/api/v1/workloads/{workload_id}/"
        workload = api.get(path)
        if not watch:
            if as_json:
                output.emit_json(workload)
            else:
                typer.echo(output.workload_details(workload))
            return
        deadline = time.monotonic() + timeout if timeout else None
        last: tuple[str, str] | None = None
        while True:
            now = (workload["state"], workload.get("last_reason") or "")
            if now != last:
                if as_json:
                    output.emit_json(workload)
                else:
                    stamp = time.strftime("%H:%M:%S")
                    typer.echo(f"{stamp}  {workload['state']:<10} {now[1]}".rstrip())
                last = now
            if workload["state"] in TERMINAL:
                code = exits.OK if workload["state"] == "succeeded" else exits.WORKLOAD_FAILED
                raise typer.Exit(code)
            if deadline is not None and time.monotonic() >= deadline:
                raise fail(
                    f"#{workload_id} is still {workload['state']} after {timeout:g} s.",
                    exits.TIMEOUT,
                )
            time.sleep(interval)
            workload = api.get(path)


@app.command()
@handles_errors
def logs(
    workload_id: Annotated[int, typer.Argument(help="The workload's id.")],
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")] = False,
    tail: Annotated[int, typer.Option(min=1, max=10_000, help="Lines from the end.")] = 200,
    replica: Annotated[int, typer.Option(min=0, help="Which replica (multi-node jobs).")] = 0,
    attempt: Annotated[
        int | None,
        typer.Option(min=1, help="An earlier attempt of the replica, from the archive."),
    ] = None,
) -> None:
    """Print the container's logs; -f follows them until the container stops. A workload
    that has ended shows its archived log."""
    with client() as api:
        for line in api.stream_lines(
            f"/api/v1/workloads/{workload_id}/logs/",
            tail=tail,
            follow="true" if follow else "false",
            replica=replica,
            attempt=attempt,
        ):
            typer.echo(line)


@app.command()
@handles_errors
def events(workload_id: int, as_json: JsonOpt = False) -> None:
    """State changes with their reasons, and the cluster's events."""
    with client() as api:
        result = api.get(f"/api/v1/workloads/{workload_id}/events/")
    if as_json:
        output.emit_json(result)
        return
    rows = [
        [e["created_at"], f"{e['from_state'] or '-'} → {e['to_state']}", e["reason"]]
        for e in result["events"]
    ]
    typer.echo(output.table(["TIME", "CHANGE", "REASON"], rows))
    if result["cluster_events"]:
        typer.echo("")
        typer.echo(
            output.table(
                ["TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"],
                [
                    [e["time"], e["type"], e["reason"], e["object"], e["message"]]
                    for e in result["cluster_events"]
                ],
            )
        )
    elif result["cluster_events_unavailable"]:
        typer.echo(f"(cluster events: {result['cluster_events_unavailable']})")


@app.command()
@handles_errors
def cancel(
    workload_id: int,
    reason: Annotated[str | None, typer.Option(help="Shown in the events.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a workload (owner, team lead or admin)."""
    act(workload_id, "cancel", {"reason": reason} if reason else {}, as_json)


@app.command()
@handles_errors
def suspend(workload_id: int, as_json: JsonOpt = False) -> None:
    """Stop a notebook and keep its files."""
    act(workload_id, "suspend", None, as_json)


@app.command()
@handles_errors
def resume(workload_id: int, as_json: JsonOpt = False) -> None:
    """Queue a suspended notebook again."""
    act(workload_id, "resume", None, as_json)


@app.command()
@handles_errors
def clone(
    workload_id: int,
    name: NameOpt = None,
    edit: Annotated[
        bool,
        typer.Option(
            "--edit",
            help="Open its spec in $VISUAL or $EDITOR first, then submit what you saved.",
        ),
    ] = False,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --edit: check the edited spec only.")
    ] = False,
    confirm: ConfirmOpt = False,
) -> None:
    """Submit a copy of a workload (with --edit: change it first)."""
    if edit:
        with client() as api:
            original = api.get(f"/api/v1/workloads/{workload_id}/")
        edited = _edit_spec(spec.spec_of(original, name=name), workload_id)
        request = spec.request_of(edited, {})
        send(request, key=key, as_json=as_json, dry_run=dry_run, confirm=confirm)
        return
    if dry_run:
        raise fail("--dry-run checks an edited copy: use it with --edit.", exits.USAGE)
    body: dict[str, Any] = {"name": name} if name else {}
    if confirm:
        body["confirm_preemption"] = True
    with client() as api:
        workload = api.create(f"/api/v1/workloads/{workload_id}/clone/", body, idempotency_key=key)
    if as_json:
        output.emit_json(workload)
    else:
        typer.echo(f"Submitted #{workload['id']} {workload['name']}: {workload['state']}")


def _edit_spec(values: dict[str, Any], workload_id: int) -> dict[str, Any]:
    """Write ``values`` as a YAML spec, open it in the user's editor, and read it back."""
    import subprocess
    import tempfile

    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    with tempfile.TemporaryDirectory(prefix="gpupaas-") as folder:
        path = Path(folder) / f"clone-of-{workload_id}.yaml"
        path.write_text(
            f"# A copy of workload #{workload_id}: change what you like, save and quit to "
            "submit it.\n" + spec.dump(values),
            encoding="utf-8",
        )
        try:
            status = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise fail(f"Cannot run the editor {editor!r}: {exc}.", exits.USAGE) from None
        if status != 0:
            raise fail(f"The editor exited with status {status}; nothing submitted.", exits.USAGE)
        return spec.load_file(path)
