"""``gpupaas``: submit and follow GPU workloads from a terminal or a CI job.

Exit codes (see ``gpupaas exit-codes``): 0 success, 1 server error, 2 usage, 3 not configured
or token refused, 4 not allowed, 5 not found, 6 request refused, 7 rate limited, 8 network,
9 watch timed out, 10 watched workload did not succeed.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from gpupaas_cli import exits, output, spec
from gpupaas_cli.client import ApiError, Client, NetworkError
from gpupaas_cli.config import Config, ConfigError, config_path, load, normalise_url, save

app = typer.Typer(
    name="gpupaas",
    help="Self-service GPUs: submit notebooks, jobs and sweeps; follow, stop and inspect them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
submit_app = typer.Typer(
    help="Submit a notebook, training job or sweep, from flags or a YAML spec (-f).",
    invoke_without_command=True,
)
app.add_typer(submit_app, name="submit")

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
TERMINAL = {"succeeded", "failed", "cancelled", "expired"}


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
    return Client(load())


# --- configuration ---------------------------------------------------------------------------


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


# --- submit ----------------------------------------------------------------------------------

FileOpt = Annotated[
    Path | None, typer.Option("--file", "-f", help="A YAML spec; flags override its fields.")
]
NameOpt = Annotated[str | None, typer.Option("--name", "-n", help="A name for it.")]
TeamOpt = Annotated[str | None, typer.Option(help="Team slug (needed if you are in several).")]
ClassOpt = Annotated[str | None, typer.Option("--gpu-class", "-c", help="e.g. H100-80GB")]
ImageOpt = Annotated[str | None, typer.Option(help="Image name (see `gpupaas images`).")]
GpuOpt = Annotated[float | None, typer.Option(help="GPUs per replica: 0.5, 1, 2 …")]
PriorityOpt = Annotated[str | None, typer.Option("--priority", help="Priority class.")]
RequeueOpt = Annotated[
    bool | None,
    typer.Option(
        "--requeue/--no-requeue",
        help="When preempted: back in the queue, resuming from the checkpoint (default), or end.",
    ),
]
EnvOpt = Annotated[list[str] | None, typer.Option("--env", "-e", help="NAME=VALUE (repeat).")]
SecretOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--secret",
        "-s",
        help="NAME[:ENV[=KEY]] (repeat): a team or personal secret as variables, by name.",
    ),
]
DatasetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--dataset",
        "-d",
        help="NAME (repeat): a dataset of the team, mounted read-only at /datasets/NAME.",
    ),
]
KeyOpt = Annotated[
    str | None,
    typer.Option(help="Idempotency-Key: the same key never submits twice (default: random)."),
]
CommandArg = Annotated[
    list[str] | None, typer.Argument(help="The command, after --, e.g. -- python train.py")
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Check it and show what it would be charged and what it would preempt; submit "
        "nothing.",
    ),
]
ConfirmOpt = Annotated[
    bool,
    typer.Option(
        "--confirm-preemption",
        help="Submit even though starting it preempts running work of yours or your teammates.",
    ),
]


def _send(
    body: dict[str, Any], *, key: str | None, as_json: bool, dry_run: bool, confirm: bool
) -> None:
    """Check (``dry_run``) or submit a request body and tell what happened."""
    with client() as api:
        if dry_run:
            answer = api.post("/api/v1/workloads/validate/", body)
        else:
            if confirm:
                body = {**body, "confirm_preemption": True}
            workload = api.create("/api/v1/workloads/", body, idempotency_key=key)
    if dry_run:
        if as_json:
            output.emit_json(answer)
        else:
            typer.echo(output.dry_run_text(answer))
        return
    if as_json:
        output.emit_json(workload)
    else:
        typer.echo(
            f"Submitted {workload['kind']} {workload['name']!r} as #{workload['id']}: "
            f"{workload['state']}. Follow it with `gpupaas status {workload['id']} --watch`."
        )


def _submit(
    *,
    kind: str | None,
    file: Path | None,
    key: str | None,
    as_json: bool,
    dry_run: bool = False,
    confirm: bool = False,
    **flags: Any,
) -> None:
    base = spec.load_file(file) if file else {}
    env = flags.pop("env", None)
    grid = flags.pop("grid", None)
    secrets = flags.pop("secret", None)
    datasets = flags.pop("dataset", None)
    endpoint = {k: v for k, v in (flags.pop("endpoint", None) or {}).items() if v is not None}
    if endpoint:
        from_file = base.get("endpoint")
        flags["endpoint"] = {**(from_file if isinstance(from_file, dict) else {}), **endpoint}
    overrides: dict[str, Any] = {
        "kind": kind,
        **flags,
        "env": spec.parse_pairs(env, "--env") if env else None,
        "secrets": [spec.parse_secret_ref(s) for s in secrets] if secrets else None,
        "datasets": list(datasets) if datasets else None,
        "grid": spec.parse_grid(grid) if grid else None,
    }
    body = spec.build_request(base, overrides)
    _send(body, key=key, as_json=as_json, dry_run=dry_run, confirm=confirm)


@submit_app.callback()
@handles_errors
def submit_from_file(
    ctx: typer.Context,
    file: FileOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    confirm: ConfirmOpt = False,
) -> None:
    """With only -f: submit what the spec file describes."""
    if ctx.invoked_subcommand is not None:
        return
    if file is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(exits.USAGE)
    _submit(kind=None, file=file, key=key, as_json=as_json, dry_run=dry_run, confirm=confirm)


@submit_app.command("notebook")
@handles_errors
def submit_notebook(
    name: NameOpt = None,
    gpu: GpuOpt = None,
    gpu_class: ClassOpt = None,
    image: ImageOpt = None,
    team: TeamOpt = None,
    idle_timeout: Annotated[
        int | None, typer.Option(help="Stop after this many idle seconds.")
    ] = None,
    priority: PriorityOpt = None,
    env: EnvOpt = None,
    secret: SecretOpt = None,
    dataset: DatasetOpt = None,
    file: FileOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    confirm: ConfirmOpt = False,
) -> None:
    """A JupyterLab notebook on a GPU or a fraction of one."""
    _submit(
        kind="notebook",
        file=file,
        key=key,
        as_json=as_json,
        dry_run=dry_run,
        confirm=confirm,
        name=name,
        gpu=gpu,
        gpu_class=gpu_class,
        image=image,
        team=team,
        idle_timeout_seconds=idle_timeout,
        priority_class=priority,
        env=env,
        secret=secret,
        dataset=dataset,
    )


@submit_app.command("job")
@handles_errors
def submit_job(
    command: CommandArg = None,
    name: NameOpt = None,
    gpu: GpuOpt = None,
    gpu_class: ClassOpt = None,
    image: ImageOpt = None,
    team: TeamOpt = None,
    replicas: Annotated[int | None, typer.Option(help="Nodes (replicas); default 1.")] = None,
    max_runtime: Annotated[int | None, typer.Option(help="Stop after this many seconds.")] = None,
    retries: Annotated[int | None, typer.Option(help="Retries after a failure.")] = None,
    requeue: RequeueOpt = None,
    priority: PriorityOpt = None,
    env: EnvOpt = None,
    secret: SecretOpt = None,
    dataset: DatasetOpt = None,
    file: FileOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    confirm: ConfirmOpt = False,
) -> None:
    """A training job: an image and a command on 1..N GPUs per replica, 1..M replicas."""
    _submit(
        kind="training",
        file=file,
        key=key,
        as_json=as_json,
        dry_run=dry_run,
        confirm=confirm,
        command=command,
        name=name,
        gpu=gpu,
        gpu_class=gpu_class,
        image=image,
        team=team,
        replicas=replicas,
        max_runtime_seconds=max_runtime,
        retries=retries,
        requeue=requeue,
        priority_class=priority,
        env=env,
        secret=secret,
        dataset=dataset,
    )


@submit_app.command("endpoint")
@handles_errors
def submit_endpoint(
    command: CommandArg = None,
    name: NameOpt = None,
    gpu: GpuOpt = None,
    gpu_class: ClassOpt = None,
    image: ImageOpt = None,
    team: TeamOpt = None,
    model_path: Annotated[
        str | None, typer.Option(help="/team/… or /datasets/NAME/… (name the dataset too).")
    ] = None,
    model_uri: Annotated[str | None, typer.Option(help="Or s3://, gs://, https://, hf://")] = None,
    model_secret: Annotated[str | None, typer.Option(help="Secret with the store's keys.")] = None,
    port: Annotated[int | None, typer.Option(help="The server's port (1024-65535).")] = None,
    health_path: Annotated[str | None, typer.Option(help="e.g. /health")] = None,
    min_replicas: Annotated[int | None, typer.Option(help="0 scales to zero when idle.")] = None,
    max_replicas: Annotated[int | None, typer.Option()] = None,
    scale_on: Annotated[str | None, typer.Option(help="rps or gpu")] = None,
    scale_target: Annotated[float | None, typer.Option(help="Per replica.")] = None,
    idle_minutes: Annotated[int | None, typer.Option(help="With --min-replicas 0.")] = None,
    priority: PriorityOpt = None,
    env: EnvOpt = None,
    secret: SecretOpt = None,
    dataset: DatasetOpt = None,
    file: FileOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    confirm: ConfirmOpt = False,
) -> None:
    """An inference endpoint: a serving image (vLLM, Triton, TGI …), a model, replicas
    between a minimum and a maximum, in the production class (team leads)."""
    _submit(
        kind="inference",
        file=file,
        key=key,
        as_json=as_json,
        dry_run=dry_run,
        confirm=confirm,
        command=command,
        name=name,
        gpu=gpu,
        gpu_class=gpu_class,
        image=image,
        team=team,
        priority_class=priority,
        env=env,
        secret=secret,
        dataset=dataset,
        endpoint={
            "model_path": model_path,
            "model_uri": model_uri,
            "model_secret": model_secret,
            "port": port,
            "health_path": health_path,
            "min_replicas": min_replicas,
            "max_replicas": max_replicas,
            "scale_metric": scale_on,
            "scale_target": scale_target,
            "idle_minutes": idle_minutes,
        },
    )


@submit_app.command("sweep")
@handles_errors
def submit_sweep(
    command: CommandArg = None,
    grid: Annotated[
        list[str] | None, typer.Option(help="PARAM=v1,v2 (repeat); one trial per point.")
    ] = None,
    parallelism: Annotated[
        int | None, typer.Option(help="Trials that run at once (default 4).")
    ] = None,
    name: NameOpt = None,
    gpu: GpuOpt = None,
    gpu_class: ClassOpt = None,
    image: ImageOpt = None,
    team: TeamOpt = None,
    max_runtime: Annotated[int | None, typer.Option(help="Per job, in seconds.")] = None,
    requeue: RequeueOpt = None,
    env: EnvOpt = None,
    secret: SecretOpt = None,
    dataset: DatasetOpt = None,
    file: FileOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryRunOpt = False,
    confirm: ConfirmOpt = False,
) -> None:
    """A batch sweep over a parameter grid, on idle capacity."""
    _submit(
        kind="sweep",
        file=file,
        key=key,
        as_json=as_json,
        dry_run=dry_run,
        confirm=confirm,
        command=command,
        grid=grid,
        parallelism=parallelism,
        name=name,
        gpu=gpu,
        gpu_class=gpu_class,
        image=image,
        team=team,
        max_runtime_seconds=max_runtime,
        requeue=requeue,
        env=env,
        secret=secret,
        dataset=dataset,
    )


# --- inspect ---------------------------------------------------------------------------------


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
def trials(workload_id: int, as_json: JsonOpt = False) -> None:
    """A sweep's trials: parameters, state, exit code, runtime and last metrics line."""
    with client() as api:
        result = api.get(f"/api/v1/workloads/{workload_id}/trials/")
    if as_json:
        output.emit_json(result)
        return
    sweep = result["sweep"]
    typer.echo(f"{sweep['name']} (#{sweep['id']}): {sweep['state']}. {sweep['last_reason']}")
    rows = [
        [
            t["index"],
            " ".join(f"{k}={v}" for k, v in t["params"].items()),
            t["state"],
            "-" if t["exit_code"] is None else t["exit_code"],
            "-" if t["runtime_seconds"] is None else f"{t['runtime_seconds']}s",
            t["last_metrics_line"] or "-",
        ]
        for t in result["trials"]
    ]
    typer.echo(output.table(["#", "PARAMS", "STATE", "EXIT", "RUNTIME", "METRICS"], rows))


# --- act -------------------------------------------------------------------------------------


def _act(workload_id: int, action: str, body: dict[str, Any] | None, as_json: bool) -> None:
    with client() as api:
        workload = api.post(f"/api/v1/workloads/{workload_id}/{action}/", body)
    if as_json:
        output.emit_json(workload)
    else:
        typer.echo(f"#{workload['id']} {workload['name']}: {workload['state']}")


@app.command()
@handles_errors
def cancel(
    workload_id: int,
    reason: Annotated[str | None, typer.Option(help="Shown in the events.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Cancel a workload (owner, team lead or admin)."""
    _act(workload_id, "cancel", {"reason": reason} if reason else {}, as_json)


@app.command()
@handles_errors
def suspend(workload_id: int, as_json: JsonOpt = False) -> None:
    """Stop a notebook and keep its files."""
    _act(workload_id, "suspend", None, as_json)


@app.command()
@handles_errors
def resume(workload_id: int, as_json: JsonOpt = False) -> None:
    """Queue a suspended notebook again."""
    _act(workload_id, "resume", None, as_json)


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
        request = spec.build_request(edited, {})
        _send(request, key=key, as_json=as_json, dry_run=dry_run, confirm=confirm)
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


# --- secrets ---------------------------------------------------------------------------------

endpoint_app = typer.Typer(
    help="Inference endpoints: their URL, replicas, load and keys; scale, wake, roll out.",
    no_args_is_help=True,
)
app.add_typer(endpoint_app, name="endpoint")


@endpoint_app.command("show")
@handles_errors
def endpoint_show(workload_id: int, as_json: JsonOpt = False) -> None:
    """URL, replicas (held and asked), why more wait, rollout, keys, load over time, cost."""
    with client() as api:
        overview = api.get(f"/api/v1/workloads/{workload_id}/endpoint/")
    if as_json:
        output.emit_json(overview)
        return
    w = overview["workload"]
    typer.echo(f"#{w['id']} {w['name']}: {w['state']}")
    typer.echo(f"  {overview['status']}")
    typer.echo(f"  URL        {overview['url'] or overview['service'] + ' (in the cluster)'}")
    typer.echo(
        f"  replicas   {overview['replicas']} of {overview['target']} asked "
        f"(min {overview['min_replicas']}, max {overview['max_replicas']})"
    )
    if overview["rollout"]:
        r = overview["rollout"]
        typer.echo(
            f"  rollout    revision {r.get('revision')}: {r.get('state')} {r.get('message', '')}"
        )
    typer.echo(f"  cost       {overview['cost_per_hour']} per hour")
    for k in overview["keys"]:
        state = f"revoked {k['revoked_at']}" if k["revoked_at"] else "active"
        typer.echo(f"  key        #{k['id']} {k['name']} {k['prefix']}… {state}")
    if overview["samples"]:
        typer.echo("  time      replicas  asked  req/s   p95 s   GPU%  decision")
        for sample in overview["samples"][-10:]:

            def num(v: Any, fmt: str) -> str:
                return "-" if v is None else format(v, fmt)

            typer.echo(
                f"  {sample['at'][11:19]}  {sample['replicas']:>8}  {sample['target']:>5}  "
                f"{num(sample['requests_per_second'], '6.1f'):>6}  "
                f"{num(sample['latency_p95_seconds'], '6.3f'):>6}  "
                f"{num(sample['gpu_utilisation'], '4.0f'):>4}  {sample['decision']}"
            )


@endpoint_app.command("scale")
@handles_errors
def endpoint_scale(workload_id: int, replicas: int, as_json: JsonOpt = False) -> None:
    """Ask for REPLICAS (between its minimum and maximum; more wait on the team's guarantee)."""
    _act(workload_id, "scale", {"replicas": replicas}, as_json)


@endpoint_app.command("wake")
@handles_errors
def endpoint_wake(workload_id: int, as_json: JsonOpt = False) -> None:
    """Start an endpoint that was scaled to zero."""
    _act(workload_id, "wake", None, as_json)


@endpoint_app.command("rollout")
@handles_errors
def endpoint_rollout(
    workload_id: int,
    image: ImageOpt = None,
    env: EnvOpt = None,
    model_path: Annotated[str | None, typer.Option()] = None,
    model_uri: Annotated[str | None, typer.Option()] = None,
    model_secret: Annotated[str | None, typer.Option()] = None,
    as_json: JsonOpt = False,
) -> None:
    """Roll out a new image, model or environment; rolled back by itself if it is not ready."""
    body: dict[str, Any] = {
        k: v
        for k, v in {
            "image": image,
            "model_path": model_path,
            "model_uri": model_uri,
            "model_secret": model_secret,
        }.items()
        if v is not None
    }
    if env is not None:
        body["env"] = spec.parse_pairs(env, "--env")
    _act(workload_id, "rollout", body, as_json)


@endpoint_app.command("key-create")
@handles_errors
def endpoint_key_create(workload_id: int, name: str, as_json: JsonOpt = False) -> None:
    """A new key for applications; it is printed once and never shown again."""
    with client() as api:
        created = api.request("POST", f"/api/v1/workloads/{workload_id}/keys/", json={"name": name})
    if as_json:
        output.emit_json(created)
    else:
        typer.echo(f"Key #{created['id']} {created['name']} (copy it now, it is not shown again):")
        typer.echo(created["key"])


@endpoint_app.command("key-revoke")
@handles_errors
def endpoint_key_revoke(workload_id: int, key_id: int) -> None:
    """Revoke a key: calls with it are refused from now on."""
    with client() as api:
        api.request("DELETE", f"/api/v1/workloads/{workload_id}/keys/{key_id}/")
    typer.echo(f"Key #{key_id} revoked.")


secret_app = typer.Typer(
    help="Team and personal secrets (tokens, keys): written once, never shown back; requests "
    "refer to them with --secret NAME[:ENV[=KEY]].",
    no_args_is_help=True,
)
app.add_typer(secret_app, name="secret")
SecretTeamOpt = Annotated[str, typer.Option(help="The team's slug.")]
ScopeOpt = Annotated[
    str | None,
    typer.Option(help="team or personal, when a team secret and yours share the name."),
]


@secret_app.command("create")
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


@secret_app.command("list")
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


@secret_app.command("delete")
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


# --- capacity --------------------------------------------------------------------------------


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
            ["TEAM", "OWNER", "GPU CLASS", "ALLOCATED H", "USED H", "UTIL", "COST"],
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


@app.command("gpus")
@handles_errors
def gpu_classes(as_json: JsonOpt = False) -> None:
    """GPU classes on offer with their free capacity."""
    with client() as api:
        rows = api.get("/api/v1/gpu-classes/")
    if as_json:
        output.emit_json(rows)
        return
    typer.echo(
        output.table(
            ["CLASS", "MEMORY", "SHARING", "FREE", "CAPACITY", "COST/H"],
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
def images(as_json: JsonOpt = False) -> None:
    """Images on offer."""
    with client() as api:
        rows = api.get("/api/v1/images/")
    if as_json:
        output.emit_json(rows)
        return
    typer.echo(
        output.table(
            ["NAME", "KIND", "REFERENCE"], [[r["name"], r["kind"], r["reference"]] for r in rows]
        )
    )


# --- governance: team policies, budgets, right-sizing advice ----------------------------------

policy_app = typer.Typer(
    help="A team's policy: classes, images, size and runtime caps (set by platform admins).",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")
budget_app = typer.Typer(
    help="A team's monthly budget: spend, run rate, forecast, thresholds, hard stop.",
    no_args_is_help=True,
)
app.add_typer(budget_app, name="budget")
advice_app = typer.Typer(
    help="Right-sizing advice for quotas from measured usage (platform admins).",
    no_args_is_help=True,
)
app.add_typer(advice_app, name="advice")
TeamSlugOpt = Annotated[str, typer.Option(help="The team's slug.")]
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


@policy_app.command("show")
@handles_errors
def policy_show(team: TeamSlugOpt, as_json: JsonOpt = False) -> None:
    """What the team may ask for beyond its quota."""
    with client() as api:
        result = api.get(f"/api/v1/teams/{team}/policy/")
    if as_json:
        output.emit_json(result)
    else:
        typer.echo(_policy_text(result))


@policy_app.command("set")
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


def _budget_text(b: dict[str, Any]) -> str:
    if b["amount"] is None:
        return f"{b['team']} has no budget for {b['month']}."
    c = b["currency"]
    stop = "on" if b["hard_stop"] else "off"
    if b["stopping"]:
        stop += ": spent; new work only in the batch class or with a lead's approval"
    elif b["stop_lifted"]:
        stop += " (a lead approved more work this month)"
    return "\n".join(
        [
            f"Budget of {b['team']} for {b['month']}: {b['amount']} {c}",
            f"Spent: {b['spent']} {c}   run rate: {b['run_rate_per_hour']} {c}/h",
            f"Forecast for the month: {b['forecast']} {c}",
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


@app.command("config-path", hidden=True)
def show_config_path() -> None:
    typer.echo(str(config_path()))


if __name__ == "__main__":  # pragma: no cover
    app()


# --- quota requests and reservations ---------------------------------------------------------


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


StartOpt = Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset); default: now.")]
EndOpt = Annotated[str | None, typer.Option(help="ISO 8601 (UTC if no offset).")]
HoursOpt = Annotated[float | None, typer.Option(help="Or: how long from the start, in hours.")]
CommentOpt = Annotated[str, typer.Option(help="Told to whoever asked, and audited.")]

grant_app = typer.Typer(
    help="Ask for more of a GPU class for a period; leads decide per-user caps, admins team "
    "quotas. Approved grants start and end by themselves.",
    no_args_is_help=True,
)
app.add_typer(grant_app, name="quota-request")


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


@grant_app.command("ask")
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


@grant_app.command("list")
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


@grant_app.command("approve")
@handles_errors
def grant_approve(request_id: int, comment: CommentOpt = "", as_json: JsonOpt = False) -> None:
    """Approve a pending request: the grant starts and ends by itself."""
    _decide_request(request_id, True, comment, as_json)


@grant_app.command("reject")
@handles_errors
def grant_reject(request_id: int, comment: CommentOpt = "", as_json: JsonOpt = False) -> None:
    """Reject a pending request."""
    _decide_request(request_id, False, comment, as_json)


@grant_app.command("withdraw")
@handles_errors
def grant_withdraw(request_id: int, as_json: JsonOpt = False) -> None:
    """Withdraw a pending request."""
    with client() as api:
        result = api.post(f"/api/v1/quota-requests/{request_id}/cancel/")
    _print_request(result, as_json)


reservation_app = typer.Typer(
    help="Book GPUs of a class for a time window; the capacity is held for the team then.",
    no_args_is_help=True,
)
app.add_typer(reservation_app, name="reservation")


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


@reservation_app.command("book")
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


@reservation_app.command("list")
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


@reservation_app.command("show")
@handles_errors
def reservation_show(reservation_id: int, as_json: JsonOpt = False) -> None:
    """One reservation, with the GPU-hours held and used so far."""
    with client() as api:
        result = api.get(f"/api/v1/reservations/{reservation_id}/")
    _print_reservation(result, as_json)


@reservation_app.command("calendar")
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


@reservation_app.command("approve")
@handles_errors
def reservation_approve(
    reservation_id: int, comment: CommentOpt = "", as_json: JsonOpt = False
) -> None:
    """Approve a booking that waits (platform admins)."""
    _decide_reservation(reservation_id, True, comment, as_json)


@reservation_app.command("reject")
@handles_errors
def reservation_reject(
    reservation_id: int, comment: CommentOpt = "", as_json: JsonOpt = False
) -> None:
    """Reject a booking that waits (platform admins)."""
    _decide_reservation(reservation_id, False, comment, as_json)


@reservation_app.command("withdraw")
@handles_errors
def reservation_withdraw(reservation_id: int, as_json: JsonOpt = False) -> None:
    """Withdraw a booking; an open window closes now."""
    with client() as api:
        result = api.post(f"/api/v1/reservations/{reservation_id}/cancel/")
    _print_reservation(result, as_json)
