"""``gpupaas submit``: a notebook, training job, inference endpoint or sweep, from flags or a
YAML spec (``-f``); flags override the spec's fields. Every door builds one
:class:`~gpupaas_cli.spec.WorkloadRequest` and sends it whole."""

from pathlib import Path
from typing import Annotated, Any

import typer

from gpupaas_cli import exits, output, spec
from gpupaas_cli.commands.common import (
    ConfirmOpt,
    EnvOpt,
    ImageOpt,
    JsonOpt,
    KeyOpt,
    NameOpt,
    TeamOpt,
    client,
    handles_errors,
)

app = typer.Typer(
    help="Submit a notebook, training job or sweep, from flags or a YAML spec (-f).",
    invoke_without_command=True,
)

FileOpt = Annotated[
    Path | None, typer.Option("--file", "-f", help="A YAML spec; flags override its fields.")
]
ClassOpt = Annotated[str | None, typer.Option("--gpu-class", "-c", help="e.g. H100-80GB")]
GpuOpt = Annotated[float | None, typer.Option(help="GPUs per replica: 0.5, 1, 2 …")]
PriorityOpt = Annotated[str | None, typer.Option("--priority", help="Priority class.")]
RequeueOpt = Annotated[
    bool | None,
    typer.Option(
        "--requeue/--no-requeue",
        help="When preempted: back in the queue, resuming from the checkpoint (default), or end.",
    ),
]
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


def send(
    request: spec.WorkloadRequest, *, key: str | None, as_json: bool, dry_run: bool, confirm: bool
) -> None:
    """Check (``dry_run``) or submit a request, sent whole, and tell what happened."""
    with client() as api:
        if dry_run:
            answer = api.post("/api/v1/workloads/validate/", request.body())
        else:
            if confirm:
                request = request.confirmed()
            workload = api.create("/api/v1/workloads/", request.body(), idempotency_key=key)
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
    request = spec.request_of(base, overrides)
    send(request, key=key, as_json=as_json, dry_run=dry_run, confirm=confirm)


@app.callback()
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


@app.command("notebook")
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


@app.command("job")
@handles_errors
def submit_job(
    command: CommandArg = None,
    name: NameOpt = None,
    gpu: GpuOpt = None,
    gpu_class: ClassOpt = None,
    image: ImageOpt = None,
    team: TeamOpt = None,
    replicas: Annotated[int | None, typer.Option(help="Nodes (replicas); default 1.")] = None,
    topology: Annotated[
        str | None,
        typer.Option(help="Replicas in one domain: LEVEL (prefer) or LEVEL:required, e.g. rack."),
    ] = None,
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
        topology=topology,
        max_runtime_seconds=max_runtime,
        retries=retries,
        requeue=requeue,
        priority_class=priority,
        env=env,
        secret=secret,
        dataset=dataset,
    )


@app.command("endpoint")
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


@app.command("sweep")
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
