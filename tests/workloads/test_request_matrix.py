"""One rule set, two doors: the same requests through the portal form and through the API are
accepted or refused alike, on the same field, with the same message.

Each row is a request as a person means it (a kind, a class, an amount, a grid, …); the test
writes it as the portal's form fields and as the API's JSON body, sends both, and compares
what comes back. Accepted requests must record the same workload (amount, replicas, charged
total, priority, command, environment, grid). Refusals carry the field the rules name (in the
API's terms) so that each row also proves what it claims to test.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.catalog.models import Cluster, ClusterNode, GpuClass, Image
from apps.common.ratelimit import rate_limiter
from apps.workloads import rules
from apps.workloads.models import Workload
from tests.factories import ImageFactory, TeamQuotaFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

TRAIN = ("python", "train.py")


@dataclass(frozen=True)
class Row:
    """A request, who sends it, and what the rules say: None (accepted) or the refused field."""

    id: str
    kind: str
    gpu_class: str  # a key of World.classes
    gpu_milli: int
    refused: str | None = None
    user: str = "owner"  # owner (a member), lead, admin
    image: str = "any"  # a key of World.images
    replicas: int | None = None  # training: nodes; others: left out
    priority: str | None = None
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    grid: dict[str, list[str]] = field(default_factory=dict)
    runtime: int | None = None  # seconds; the form asks in hours
    idle: int | None = None  # seconds; the form asks in minutes
    retries: int | None = None
    parallelism: int | None = None  # sweeps: trials at once; None: left out
    name: str = "matrix"


def nb(id: str, gpu_class: str, milli: int, refused: str | None = None, **kw: Any) -> Row:
    return Row(id, "notebook", gpu_class, milli, refused, **{"image": "notebook", **kw})


def job(id: str, gpu_class: str, milli: int, refused: str | None = None, **kw: Any) -> Row:
    values = {"image": "training", "replicas": 1, "command": TRAIN, **kw}
    return Row(id, "training", gpu_class, milli, refused, **values)


def sweep(id: str, gpu_class: str, milli: int, refused: str | None = None, **kw: Any) -> Row:
    values = {"image": "training", "command": TRAIN, "grid": {"lr": ["0.1", "0.01"]}, **kw}
    return Row(id, "sweep", gpu_class, milli, refused, **values)


def many(count: int, prefix: str = "V") -> dict[str, str]:
    return {f"{prefix}{i}": "1" for i in range(count)}


def values(count: int) -> list[str]:
    return [str(i) for i in range(count)]


ROWS: list[Row] = [
    # --- accepted, every kind on every sharing mode -----------------------------------------------
    nb("notebook-mig-eighth", "mig", 125),
    nb("notebook-mig-half", "mig", 500),
    nb("notebook-mig-one-gpu", "mig", 1000),
    nb("notebook-timeslice-quarter", "timeslice", 250),
    nb("notebook-hami-half", "hami", 500),
    nb("notebook-whole-gpu", "whole", 1000),
    nb(
        "notebook-with-env-and-limits",
        "hami",
        250,
        env={"HF_HOME": "/home/jovyan/.hf"},
        runtime=8 * 3600,
        idle=30 * 60,
    ),
    nb("notebook-any-image", "timeslice", 500, image="any"),
    job("training-whole-2x2", "whole", 2000, replicas=2),
    job("training-whole-one", "whole", 1000, args=("--lr", "3e-4")),
    job("training-timeslice-fraction", "timeslice", 500),
    job("training-hami-fraction", "hami", 250),
    job("training-mig-2-nodes", "mig", 1000, replicas=2),
    job("training-gang-larger-than-the-nodes", "whole", 8000, "replicas", replicas=3),
    job("training-member-lower-class", "whole", 1000, priority="batch"),
    job("training-lead-production", "whole", 1000, user="lead", priority="production"),
    job("training-admin-production", "whole", 1000, user="admin", priority="production"),
    job("training-64-env-vars", "whole", 1000, env=many(64)),
    job("training-longest-runtime", "whole", 1000, runtime=720 * 3600, retries=10),
    sweep("sweep-whole-4-points", "whole", 1000, grid={"lr": ["0.1", "0.01"], "bs": ["1", "2"]}),
    sweep(
        "sweep-timeslice-fraction-per-point",
        "timeslice",
        250,
        grid={"lr": values(3), "bs": ["32", "64"]},
    ),
    sweep("sweep-hami-fraction-per-point", "hami", 500, grid={"lr": values(2)}),
    sweep("sweep-mig-fraction-per-point", "mig", 125, grid={"lr": values(3)}),
    sweep("sweep-64-points", "hami", 10, grid={"a": values(8), "b": values(8)}),
    # Each trial of a time-sliced sweep is charged a whole slice: 256 quarters at once exceed
    # the limit, while the default 4 at once fit.
    sweep(
        "sweep-256-slices-at-once-over-the-limit",
        "timeslice",
        10,
        "parallelism",
        grid={"a": values(16), "b": values(16)},
        parallelism=256,
    ),
    sweep("sweep-256-slices-4-at-once", "timeslice", 10, grid={"a": values(16), "b": values(16)}),
    nb("notebook-lead-production", "mig", 500, user="lead", priority="production"),
    # --- the amount, per sharing mode -------------------------------------------------------------
    nb("notebook-fraction-of-whole-class", "whole", 500, "gpu_milli"),
    job("training-fraction-of-whole-class", "whole", 250, "gpu_milli"),
    sweep("sweep-fraction-of-whole-class", "whole", 500, "gpu_milli"),
    job("training-mig-two-gpus", "mig", 2000, "gpu_milli"),
    nb("notebook-mig-two-gpus", "mig", 2000, "gpu_milli"),
    nb("notebook-mig-no-profile-holds-it", "small-mig", 1000, "gpu_milli"),
    nb("notebook-mig-profile-on-no-node", "mig", 250, "gpu_milli"),
    job("training-timeslice-fraction-2-nodes", "timeslice", 500, "replicas", replicas=2),
    job("training-hami-fraction-3-nodes", "hami", 250, "replicas", replicas=3),
    job("training-mig-fraction-2-nodes", "mig", 500, "replicas", replicas=2),
    job("training-1.5-gpus", "whole", 1500, "gpu_milli"),
    job("training-hami-2.5-gpus", "hami", 2500, "gpu_milli"),
    nb("notebook-zero-gpu", "timeslice", 0, "gpu_milli"),
    job("training-negative-gpu", "whole", -1000, "gpu_milli"),
    job("training-more-gpus-than-any-node", "whole", 16000, "gpu_milli"),
    job("training-above-team-limit", "whole", 4000, "gpu_milli", replicas=4),
    job("training-above-per-user-cap", "hami", 2000, "gpu_milli"),
    # A sweep's trials are units of their own: what runs at once must fit the limit.
    sweep(
        "sweep-above-team-limit-at-once",
        "whole",
        1000,
        "parallelism",
        grid={"a": values(9)},
        parallelism=9,
    ),
    sweep("sweep-9-trials-4-at-once-within-limit", "whole", 1000, grid={"a": values(9)}),
    sweep("sweep-parallelism-above-its-trials", "whole", 1000, "parallelism", parallelism=3),
    sweep("sweep-parallelism-zero", "whole", 1000, "parallelism", parallelism=0),
    job("training-65-nodes", "whole", 1000, "replicas", replicas=65),
    # --- the catalogue and the quota --------------------------------------------------------------
    job("training-class-without-quota", "no-quota", 1000, "gpu_class"),
    nb("notebook-disabled-class", "disabled", 1000, "gpu_class"),
    job("training-disabled-image", "whole", 1000, "image", image="disabled"),
    nb("notebook-training-image", "mig", 500, "image", image="training"),
    job("training-notebook-image", "whole", 1000, "image", image="notebook"),
    sweep("sweep-notebook-image", "whole", 1000, "image", image="notebook"),
    # --- the grid ---------------------------------------------------------------------------------
    sweep(
        "sweep-257-points-or-more", "timeslice", 10, "grid", grid={"a": values(17), "b": values(16)}
    ),
    sweep("sweep-grid-name-not-ascii", "whole", 1000, "grid", grid={"ñ": ["1", "2"]}),
    sweep("sweep-grid-name-starts-with-digit", "whole", 1000, "grid", grid={"1lr": ["1"]}),
    sweep("sweep-grid-name-with-dot", "whole", 1000, "grid", grid={"model.lr": ["1"]}),
    sweep(
        "sweep-grid-names-differ-in-case", "whole", 1000, "grid", grid={"lr": ["1"], "LR": ["2"]}
    ),
    sweep("sweep-grid-value-too-long", "whole", 1000, "grid", grid={"lr": ["x" * 257]}),
    sweep("sweep-without-grid", "whole", 1000, "grid", grid={}),
    # --- the environment --------------------------------------------------------------------------
    job("env-name-accented", "whole", 1000, "env", env={"É": "1"}),
    job("env-name-superscript", "whole", 1000, "env", env={"A²": "1"}),
    job("env-name-starts-with-digit", "whole", 1000, "env", env={"1X": "1"}),
    job("env-name-with-dash", "whole", 1000, "env", env={"MY-VAR": "1"}),
    job("env-ld-preload", "whole", 1000, "env", env={"LD_PRELOAD": "libhook.so"}),
    job("env-nvidia-visible-devices", "whole", 1000, "env", env={"NVIDIA_VISIBLE_DEVICES": "all"}),
    job("env-ld-library-path", "mig", 250, "env", env={"LD_LIBRARY_PATH": "/opt/hook"}),
    job("env-cuda-memory-limit", "hami", 250, "env", env={"CUDA_DEVICE_MEMORY_LIMIT": "80g"}),
    nb("env-cuda-visible-devices", "hami", 500, "env", env={"CUDA_VISIBLE_DEVICES": "0,1"}),
    nb("env-hami-memory-limit", "hami", 500, "env", env={"CUDA_DEVICE_MEMORY_LIMIT_0": "80g"}),
    job("env-platform-variable", "whole", 1000, "env", env={"GPUPAAS_OUTPUT_DIR": "/team/out"}),
    sweep("env-sweep-variable-in-a-sweep", "whole", 1000, "env", env={"SWEEP_LR": "1"}),
    job("env-65-variables", "whole", 1000, "env", env=many(65)),
    job("env-too-large", "whole", 1000, "env", env={"BIG": "x" * (rules.MAX_ENV_BYTES + 1)}),
    # --- the command ------------------------------------------------------------------------------
    job("training-without-command", "whole", 1000, "command", command=()),
    sweep("sweep-without-command", "whole", 1000, "command", command=()),
    # --- runtime limits and retries ---------------------------------------------------------------
    job("runtime-under-a-minute", "whole", 1000, "max_runtime_seconds", runtime=36),
    job("runtime-zero", "whole", 1000, "max_runtime_seconds", runtime=0),
    nb("runtime-over-30-days", "mig", 500, "max_runtime_seconds", runtime=744 * 3600),
    nb("idle-timeout-under-5-minutes", "mig", 500, "idle_timeout_seconds", idle=120),
    nb("idle-timeout-over-7-days", "mig", 500, "idle_timeout_seconds", idle=8 * 24 * 3600),
    job("retries-11", "whole", 1000, "retries", retries=11),
    job("retries-negative", "whole", 1000, "retries", retries=-1),
    # --- priority classes per role ----------------------------------------------------------------
    job("member-production-job", "whole", 1000, "priority_class", priority="production"),
    nb("member-training-class-notebook", "mig", 500, "priority_class", priority="training"),
    sweep(
        "member-development-class-sweep", "whole", 1000, "priority_class", priority="development"
    ),
    job("unknown-priority-class", "whole", 1000, "priority_class", priority="urgent"),
    # --- the name ---------------------------------------------------------------------------------
    job("name-empty", "whole", 1000, "name", name=""),
    job("name-101-characters", "whole", 1000, "name", name="n" * 101),
    job("name-with-a-tab", "whole", 1000, "name", name="a\tb"),
]


@dataclass
class World:
    cast: Cast
    classes: dict[str, GpuClass]
    images: dict[str, Image]

    def user(self, who: str) -> User:
        return {"owner": self.cast.owner, "lead": self.cast.lead, "admin": self.cast.admin}[who]


def _nodes(cluster: Cluster, gpu_class: GpuClass, gpus: int, layout: list[str]) -> None:
    for i in range(2):
        ClusterNode.objects.create(
            cluster=cluster,
            name=f"{gpu_class.name.lower()}-{i}",
            gpu_class=gpu_class,
            gpu_count=gpus,
            mig_layout=layout,
            cpu_milli=96_000,
            memory_mib=1_000_000,
        )


@pytest.fixture
def world(cast: Cast) -> World:
    def shared(name: str, **kw: Any) -> GpuClass:
        return GpuClass.objects.create(
            name=name, product_label=f"NVIDIA-{name}", capacity_gpus=8, **kw
        )

    classes = {
        "whole": cast.gpu_class,  # H100-80GB, whole GPUs; quota 4–8 GPUs
        "timeslice": shared(
            "L40S-TS", memory_mib=46068, sharing_mode="timeslice", timeslice_replicas=4
        ),
        "mig": shared(
            "A100-MIG",
            memory_mib=81920,
            sharing_mode="mig",
            mig_profiles=["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        ),
        "small-mig": shared(
            "A30-MIG", memory_mib=24576, sharing_mode="mig", mig_profiles=["1g.6gb", "2g.12gb"]
        ),
        "hami": shared("T4-HAMI", memory_mib=15360, sharing_mode="hami", hami_split_count=4),
        "disabled": shared("V100-OLD", memory_mib=32768, sharing_mode="whole", enabled=False),
        "no-quota": shared("B200", memory_mib=183359, sharing_mode="whole"),
    }
    for key in ("timeslice", "mig", "small-mig", "disabled"):
        TeamQuotaFactory(
            team=cast.team, gpu_class=classes[key], guaranteed_milli=2000, limit_milli=4000
        )
    TeamQuotaFactory(
        team=cast.team,
        gpu_class=classes["hami"],
        guaranteed_milli=2000,
        limit_milli=4000,
        per_user_cap_milli=1000,
    )
    hub = Cluster.objects.create(name="hub", connection="in_cluster")
    _nodes(hub, classes["whole"], 8, [])
    # No GPU is cut into 2g.20gb instances: a quarter of an A100 has nowhere to run.
    _nodes(hub, classes["mig"], 8, ["1g.10gb", "3g.40gb", "7g.80gb"])
    images = {
        "any": cast.image,
        "notebook": ImageFactory(name="JupyterLab", kind=Image.Kind.NOTEBOOK),
        "training": ImageFactory(name="PyTorch", kind=Image.Kind.TRAINING),
        "disabled": ImageFactory(name="Old CUDA 11", kind=Image.Kind.ANY, enabled=False),
    }
    return World(cast=cast, classes=classes, images=images)


# --- the two doors ----------------------------------------------------------------------------


def api_body(row: Row, world: World) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": row.kind,
        "name": row.name,
        "team": world.cast.team.slug,
        "gpu_class": world.classes[row.gpu_class].name,
        "image": world.images[row.image].name,
        "gpu_milli": row.gpu_milli,
        "command": list(row.command),
        "args": list(row.args),
        "env": row.env,
    }
    optional = {
        "replicas": row.replicas,
        "priority_class": row.priority,
        "max_runtime_seconds": row.runtime,
        "idle_timeout_seconds": row.idle,
        "retries": row.retries,
        "grid": row.grid if row.kind == "sweep" else None,
        "parallelism": row.parallelism,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def form_data(row: Row, world: World) -> dict[str, str]:
    """The portal's fields, typed as a person would (hours, minutes, NAME=value lines)."""
    data = {
        "action": "submit",
        "name": row.name,
        "team": str(world.cast.team.pk),
        "gpu_class": str(world.classes[row.gpu_class].pk),
        "image": str(world.images[row.image].pk),
        "gpu_milli": str(row.gpu_milli),
        "priority_class": row.priority or "",
        "env": "\n".join(f"{k}={v}" for k, v in row.env.items()),
        "max_runtime_hours": "" if row.runtime is None else str(Decimal(row.runtime) / 3600),
    }
    if row.kind == "notebook":
        data["idle_timeout_minutes"] = "" if row.idle is None else str(row.idle // 60)
    else:
        data["command"] = shlex.join(row.command)
        data["args"] = shlex.join(row.args)
    if row.kind == "training":
        data["replicas"] = str(row.replicas)
        data["retries"] = "" if row.retries is None else str(row.retries)
    if row.kind == "sweep":
        data["grid"] = "\n".join(f"{k}={','.join(v)}" for k, v in row.grid.items())
        data["parallelism"] = "" if row.parallelism is None else str(row.parallelism)
    return data


def test_every_row_is_expressible_in_both_doors() -> None:
    """What the portal's fields cannot say is not a fair row (the form would say it otherwise)."""
    for row in ROWS:
        assert row.runtime is None or row.runtime * 100 % 3600 == 0, row.id  # hours, 2 places
        assert row.idle is None or row.idle % 60 == 0, row.id
        assert all("," not in v and v == v.strip() and v for vs in row.grid.values() for v in vs)
        assert all("\n" not in k + v and v == v.strip() for k, v in row.env.items()), row.id
        assert row.kind != "notebook" or not (row.command or row.args or row.grid), row.id
        assert row.kind == "training" or (row.replicas is None and row.retries is None), row.id
        assert row.kind == "notebook" or row.idle is None, row.id


def test_the_matrix_covers_every_kind_sharing_mode_and_outcome() -> None:
    assert len(ROWS) >= 60
    assert len({r.id for r in ROWS}) == len(ROWS)
    kinds_and_modes = {(r.kind, r.gpu_class) for r in ROWS}
    for kind in ("notebook", "training", "sweep"):
        for mode in ("whole", "timeslice", "mig", "hami"):
            assert (kind, mode) in kinds_and_modes, (kind, mode)
    accepted = {(r.kind, r.gpu_class) for r in ROWS if r.refused is None}
    assert {("notebook", m) for m in ("whole", "timeslice", "mig", "hami")} <= accepted
    assert {("training", m) for m in ("whole", "timeslice", "mig", "hami")} <= accepted
    assert {("sweep", m) for m in ("whole", "timeslice", "mig", "hami")} <= accepted
    assert len([r for r in ROWS if r.refused]) >= 40


def _created(response_location: str) -> Workload:
    return Workload.objects.get(pk=int(response_location.rstrip("/").split("/")[-1]))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_portal_and_api_agree(world: World, row: Row) -> None:
    user = world.user(row.user)
    portal = Client()
    portal.force_login(user)
    _, token = api_token_create(actor=user, name="matrix", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    rate_limiter().reset()

    from_api = api.post("/api/v1/workloads/", api_body(row, world), format="json")
    from_portal = portal.post(f"/workloads/new/{row.kind}/", form_data(row, world))

    if row.refused is None:
        assert from_api.status_code == 201, from_api.json()
        assert from_portal.status_code == 302, from_portal.context["form"].errors
        by_api = Workload.objects.get(pk=from_api.json()["id"])
        by_portal = _created(from_portal["Location"])
        recorded = (
            "kind",
            "gpu_class_id",
            "image_id",
            "gpu_milli",
            "replicas",
            "total_milli",
            "priority_class",
            "command",
            "args",
            "env",
            "params",
            "max_runtime_seconds",
            "idle_timeout_seconds",
            "retries",
        )
        assert {f: getattr(by_portal, f) for f in recorded} == {
            f: getattr(by_api, f) for f in recorded
        }
        if row.kind == "sweep":
            assert by_api.replicas == rules.grid_points(row.grid)
        return

    assert from_api.status_code == 400, from_api.json()
    assert from_portal.status_code == 400
    assert Workload.objects.count() == 0
    fields: dict[str, list[str]] = from_api.json()["fields"]
    assert row.refused in fields, fields
    form = from_portal.context["form"]
    # The API's fields as the form places them (hours for seconds, a sweep's replicas on its grid).
    expected: dict[str, list[str]] = {}
    for name, messages in fields.items():
        expected.setdefault(form.error_field(name) or "__all__", []).extend(messages)
    assert {k: list(v) for k, v in form.errors.items()} == expected


UNKNOWN_KINDS = ["serving", "batch-job"]


@pytest.mark.parametrize("kind", UNKNOWN_KINDS)
def test_a_kind_that_cannot_be_requested_is_refused_by_both_doors(world: World, kind: str) -> None:
    """The portal's kind is its address, so an unknown one is no page at all (404); the API
    names the field with the rules' message."""
    row = replace(ROWS[0], kind=kind)
    user = world.cast.owner
    portal = Client()
    portal.force_login(user)
    assert portal.post(f"/workloads/new/{kind}/", form_data(row, world)).status_code == 404
    assert portal.get(f"/workloads/new/{kind}/").status_code == 404
    _, token = api_token_create(actor=user, name="matrix", scopes=["write"], expires_at=None)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = api.post("/api/v1/workloads/", api_body(row, world), format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {
        "kind": [
            f"“{kind}” is not a kind of workload you can request; use one of: notebook, "
            "training, sweep, inference."
        ]
    }
    assert not Workload.objects.exists()
