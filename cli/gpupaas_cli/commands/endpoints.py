"""``gpupaas endpoint``: an inference endpoint's URL, replicas, load, cost and keys; scale,
wake, roll out."""

from typing import Annotated, Any

import typer

from gpupaas_cli import output, spec
from gpupaas_cli.commands.common import EnvOpt, ImageOpt, JsonOpt, act, client, handles_errors

app = typer.Typer(
    help="Inference endpoints: their URL, replicas, load and keys; scale, wake, roll out.",
    no_args_is_help=True,
)


@app.command("show")
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
    cost = output.money(overview["cost_per_hour"], overview.get("currency"))
    typer.echo(f"  cost       {cost} per hour")
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


@app.command("scale")
@handles_errors
def endpoint_scale(workload_id: int, replicas: int, as_json: JsonOpt = False) -> None:
    """Ask for REPLICAS (between its minimum and maximum; more wait on the team's guarantee)."""
    act(workload_id, "scale", {"replicas": replicas}, as_json)


@app.command("wake")
@handles_errors
def endpoint_wake(workload_id: int, as_json: JsonOpt = False) -> None:
    """Start an endpoint that was scaled to zero."""
    act(workload_id, "wake", None, as_json)


@app.command("rollout")
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
    act(workload_id, "rollout", body, as_json)


@app.command("key-create")
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


@app.command("key-revoke")
@handles_errors
def endpoint_key_revoke(workload_id: int, key_id: int) -> None:
    """Revoke a key: calls with it are refused from now on."""
    with client() as api:
        api.request("DELETE", f"/api/v1/workloads/{workload_id}/keys/{key_id}/")
    typer.echo(f"Key #{key_id} revoked.")
