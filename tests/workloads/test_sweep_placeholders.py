"""A sweep's ``{name}`` placeholders: each trial runs the sweep's command with its own values
in them (whole argv items or inside one, never through a shell), ``{{``/``}}`` are literal
braces, and an unknown name or a lone brace is refused at submit with the same field message
at every door (the service, the API, the portal form, the CLI spec)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from apps.orchestration import manifests as m
from apps.orchestration.selectors import sweep_trials, workload_spec
from apps.workloads import core, rules
from apps.workloads.models import Workload
from tests.plugins.cast import Cast
from tests.workloads.submitting import submit_fields

GRID = {"lr": ["0.1", "0.01"], "bs": ["32"]}


# --- the pure substitution ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "point", "expected"),
    [
        # A whole argv item, and a value inside one.
        (["python", "train.py"], ["--lr", "{lr}"], {"lr": "0.1"}, ["--lr", "0.1"]),
        (["python", "train.py"], ["--lr={lr}", "--out=/o/{lr}-{bs}"], {"lr": "1", "bs": "8"},
         ["--lr=1", "--out=/o/1-8"]),
        # Literal braces, written twice.
        (["python", "-c"], ["print({{'a': 1}})", "{{lr}}"], {"lr": "1"},
         ["print({'a': 1})", "{lr}"]),
        # A value with spaces and shell characters stays one argv item, untouched.
        (["python", "train.py"], ["--name", "{n}"], {"n": "a b; rm -rf / $(id)"},
         ["--name", "a b; rm -rf / $(id)"]),
    ],
)  # fmt: skip
def test_a_trials_argv_has_its_values_in_the_placeholders(
    command: list[str], args: list[str], point: dict[str, str], expected: list[str]
) -> None:
    filled_command, filled_args = core.sweep_argv(command, args, point)
    assert filled_command == command  # no placeholder there: as it was
    assert filled_args == expected


def test_inside_a_shell_script_a_value_is_one_quoted_word() -> None:
    command, args = core.sweep_argv(
        ["sh", "-c"], ["python train.py --lr {lr} --tag {tag}"], {"lr": "0.1", "tag": "x; id"}
    )
    assert command == ["sh", "-c"]
    assert args == ["python train.py --lr 0.1 --tag 'x; id'"]
    # The script's own positional parameters are plain argv items again.
    command, _ = core.sweep_argv(["bash", "-ec", "echo {v}", "name", "{v}"], [], {"v": "a b"})
    assert command == ["bash", "-ec", "echo 'a b'", "name", "a b"]
    # No shell, or a shell running a file: nothing is quoted.
    assert core.sweep_argv(["bash", "run.sh", "{v}"], [], {"v": "a b"})[0][2] == "a b"
    assert core.sweep_argv(["bash", "--norc", "run.sh", "{v}"], [], {"v": "a b"})[0][3] == "a b"


def test_placeholders_are_found_in_order_and_a_lone_brace_is_an_error() -> None:
    assert core.placeholders_in("{a}-{{b}}-{c}") == ["a", "c"]
    assert core.placeholders_in("no braces") == []
    for word in ("--cfg={a", "x}", "{1abc}", "{a b}", "{}"):
        with pytest.raises(core.PlaceholderError):
            core.placeholders_in(word)


# --- the rule: the same at every door -------------------------------------------------------------


def request(**kw: Any) -> rules.WorkloadRequest:
    values: dict[str, Any] = {
        "kind": core.KIND_SWEEP,
        "name": "s",
        "gpu_milli": 1000,
        "command": ("python", "train.py"),
        "grid": GRID,
    }
    values.update(kw)
    return rules.WorkloadRequest(**values)


def test_an_unknown_placeholder_is_a_field_error_naming_it() -> None:
    problems = rules.placeholder_problems(request(args=("--lr={lr}", "--wd={wd}")))
    assert problems == {
        "args": "{wd} in the arguments is not a parameter of this sweep; its parameters are "
        "bs, lr. Write {{ and }} for literal braces."
    }
    problems = rules.placeholder_problems(request(command=("python", "{script}")))
    assert set(problems) == {"command"} and "{script}" in problems["command"]
    assert "Did you mean {lr}?" in rules.placeholder_problems(request(args=("{LR}",)))["args"]


def test_a_lone_brace_is_a_field_error_saying_how_to_write_one() -> None:
    problems = rules.placeholder_problems(request(args=('--cfg={"a": 1}',)))
    assert "lone" in problems["args"] and "{{" in problems["args"]


def test_known_placeholders_and_escaped_braces_pass_and_other_kinds_take_braces_as_they_are() -> (
    None
):
    assert rules.placeholder_problems(request(args=("--lr={lr}", "{{x}}", "{bs}"))) == {}
    ranges = request(grid=None, ranges={"dropout": [0, 1]}, samples=2, args=("{dropout}",))
    assert rules.placeholder_problems(ranges) == {}
    job = request(kind=core.KIND_TRAINING, grid=None, args=("--cfg={a", "{wd}"))
    assert rules.placeholder_problems(job) == {}


# --- recorded: each trial runs its own command -------------------------------------------------


def submit(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "actor": cast.owner,
        "team": cast.team,
        "kind": core.KIND_SWEEP,
        "name": "lr",
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
        "args": ["--lr={lr}", "--batch", "{bs}", "--note={{ok}}"],
        "grid": GRID,
    }
    values.update(kw)
    return submit_fields(**values)


@pytest.mark.django_db
def test_each_trial_records_and_runs_its_resolved_command(cast: Cast) -> None:
    sweep = submit(cast)
    assert sweep.args == ["--lr={lr}", "--batch", "{bs}", "--note={{ok}}"]  # the template
    trials = list(sweep.trials.order_by("trial_index"))
    assert [t.args for t in trials] == [
        ["--lr=0.1", "--batch", "32", "--note={ok}"],
        ["--lr=0.01", "--batch", "32", "--note={ok}"],
    ]
    # What the trial's Job runs is that argv, and its values are still in the environment.
    (job,) = m.workload_manifests(workload_spec(trials[1]))
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "train.py"]
    assert container["args"] == ["--lr=0.01", "--batch", "32", "--note={ok}"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["SWEEP_LR"], env["SWEEP_BS"]) == ("0.01", "32")
    rows = sweep_trials(sweep)
    assert [r.args for r in rows] == [t.args for t in trials]


@pytest.mark.django_db
def test_an_unknown_placeholder_is_refused_at_submit_and_nothing_is_recorded(cast: Cast) -> None:
    with pytest.raises(ValidationError) as refused:
        submit(cast, args=["--wd={wd}"])
    assert "{wd} in the arguments is not a parameter" in refused.value.message_dict["args"][0]
    assert not Workload.objects.exists()


@pytest.mark.django_db
def test_the_api_refuses_it_with_the_fields_message_and_shows_each_trials_command(
    cast: Cast,
) -> None:
    api = APIClient()
    api.force_authenticate(cast.owner)
    body = {
        "kind": "sweep",
        "name": "lr",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py", "--lr", "{lr}"],
        "grid": {"lr": ["0.1", "0.01"]},
    }
    refused = api.post("/api/v1/workloads/", {**body, "args": ["{wd}"]}, format="json")
    assert refused.status_code == 400
    assert "{wd} in the arguments is not a parameter" in refused.json()["fields"]["args"][0]
    created = api.post("/api/v1/workloads/", body, format="json")
    assert created.status_code == 201, created.json()
    trials = api.get(f"/api/v1/workloads/{created.json()['id']}/trials/").json()["trials"]
    assert [t["command"] for t in trials] == [
        ["python", "train.py", "--lr", "0.1"],
        ["python", "train.py", "--lr", "0.01"],
    ]
    one = api.get(f"/api/v1/workloads/{trials[1]['id']}/").json()
    assert one["command"] == ["python", "train.py", "--lr", "0.01"]


@pytest.mark.django_db
def test_the_portal_form_shows_the_same_message_and_the_sweep_page_each_command(
    cast: Cast,
) -> None:
    portal = Client()
    portal.force_login(cast.owner)
    fields = {
        "action": "submit",
        "name": "lr",
        "team": str(cast.team.pk),
        "gpu_class": str(cast.gpu_class.pk),
        "image": str(cast.image.pk),
        "gpu_milli": "1000",
        "command": "python train.py",
        "grid": "lr=0.1,0.01",
    }
    page = portal.post("/workloads/new/sweep/", {**fields, "args": "--wd {wd}"})
    assert page.status_code == 400
    assert "{wd} in the arguments is not a parameter" in page.context["form"].errors["args"][0]
    assert "{wd} in the arguments is not a parameter of this sweep" in page.content.decode()
    assert not Workload.objects.exists()
    done = portal.post("/workloads/new/sweep/", {**fields, "args": "--lr {lr} --tag 'a b'"})
    assert done.status_code == 302, done.content.decode()[:2000]
    sweep = Workload.objects.get(sweep__isnull=True)
    page = portal.get(f"/workloads/{sweep.pk}/").content.decode()
    assert "python train.py --lr 0.01 --tag &#x27;a b&#x27;" in page
    trial = sweep.trials.get(trial_index=0)
    page = portal.get(f"/workloads/{trial.pk}/").content.decode()
    assert "python train.py --lr 0.1 --tag a b" in page  # the trial's own page
