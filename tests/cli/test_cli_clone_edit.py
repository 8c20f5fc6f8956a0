"""``gpupaas clone --edit``, ``submit --dry-run`` and the preemption question, against a live
server."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from apps.workloads import core
from apps.workloads.models import Workload
from gpupaas_cli import exits, spec
from tests.cli.conftest import Cli
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast
from tests.preemption import one_node, running_on_every_gpu

pytestmark = pytest.mark.django_db(transaction=True)

CliFor = Callable[..., Cli]


def original(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "name": "resnet",
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "command": ["torchrun", "train.py"],
        "args": ["--epochs", "90"],
        "env": {"WANDB_MODE": "offline"},
        "max_runtime_seconds": 3600,
        "requeue_on_preemption": False,
        "state": core.SUCCEEDED,
    }
    values.update(kw)
    return WorkloadFactory(**values)


def editor(*sed_expressions: str) -> str:
    """An $EDITOR that changes the file in place, as a person would."""
    steps = " ".join(f"-e '{e}'" for e in sed_expressions)
    return f"sed -i {steps}"


def test_spec_of_a_workload_submits_the_same_request() -> None:
    shown = {
        "kind": "sweep",
        "name": "lr",
        "team": "vision",
        "gpu_class": "L40S-48GB",
        "image": "PyTorch",
        "gpu_milli": 500,
        "replicas": 4,
        "priority_class": "batch",
        "command": ["python", "train.py"],
        "args": [],
        "env": {},
        "secrets": [
            {"name": "hf", "env": "HF_TOKEN", "key": "token", "scope": "team", "owner": None}
        ],
        "max_runtime_seconds": None,
        "retries": 0,
        "requeue_on_preemption": True,
        "params": {"grid": {"lr": ["0.1", "0.01"]}},
    }
    values = spec.spec_of(shown)
    assert values == {
        "kind": "sweep",
        "name": "lr (copy)",
        "team": "vision",
        "gpu_class": "L40S-48GB",
        "image": "PyTorch",
        "gpu_milli": 500,
        "priority_class": "batch",
        "command": ["python", "train.py"],
        "secrets": [{"name": "hf", "env": "HF_TOKEN", "key": "token"}],
        "grid": {"lr": ["0.1", "0.01"]},
    }
    # What is written to the editor reads back as the same spec.
    assert spec.build_request(values, {}) == spec.build_request(
        yaml.safe_load(spec.dump(values)), {}
    )


@pytest.mark.skipif(sys.platform == "darwin", reason="GNU sed -i")
def test_clone_edit_submits_the_edited_spec(cast: Cast, cli_for: CliFor) -> None:
    source = original(cast)
    cli = cli_for(cast.owner)
    result = cli(
        "clone",
        str(source.pk),
        "--edit",
        EDITOR=editor("s/^gpu_milli: .*/gpu_milli: 2000/", "s/^name: .*/name: resnet-2gpu/"),
        VISUAL="",
    )
    assert result.exit_code == 0, result.output
    copy = Workload.objects.get(name="resnet-2gpu")
    assert "Submitted training 'resnet-2gpu'" in result.stdout
    assert (copy.gpu_milli, copy.kind, copy.team_id) == (2000, "training", cast.team.pk)
    assert copy.command == ["torchrun", "train.py"] and copy.args == ["--epochs", "90"]
    assert copy.env == {"WANDB_MODE": "offline"} and copy.max_runtime_seconds == 3600
    assert copy.requeue_on_preemption is False


def test_clone_edit_with_a_failing_editor_submits_nothing(cast: Cast, cli_for: CliFor) -> None:
    source = original(cast)
    result = cli_for(cast.owner)("clone", str(source.pk), "--edit", EDITOR="false", VISUAL="")
    assert result.exit_code == exits.USAGE
    assert "nothing submitted" in result.stderr
    assert Workload.objects.count() == 1


def test_clone_edit_dry_run_checks_only(cast: Cast, cli_for: CliFor) -> None:
    source = original(cast)
    result = cli_for(cast.owner)(
        "clone", str(source.pk), "--edit", "--dry-run", EDITOR="true", VISUAL=""
    )
    assert result.exit_code == 0, result.output
    assert "Would be accepted: training 'resnet (copy)'" in result.stdout
    assert Workload.objects.count() == 1


def test_submit_dry_run_prints_the_charge_and_what_it_would_preempt(
    cast: Cast, cli_for: CliFor
) -> None:
    cli = cli_for(cast.owner)
    flags = ["--gpu-class", cast.gpu_class.name, "--image", cast.image.name, "-n", "big"]
    free = cli("submit", "job", *flags, "--gpu", "2", "--dry-run", "--", "python", "t.py")
    assert free.exit_code == 0, free.output
    assert "Charged: 2 GPU H100-80GB = 2 GPU." in free.stdout
    assert "Would preempt: nothing." in free.stdout

    notebook = running_on_every_gpu(
        one_node(cast.gpu_class), name="nb", team=cast.team, owner=cast.owner
    )
    busy = cli("submit", "job", *flags, "--gpu", "8", "--dry-run", "--", "python", "t.py")
    assert busy.exit_code == 0, busy.output
    assert f"#{notebook.pk} notebook 'nb' (yours, 8 GPUs H100-80GB)" in busy.stdout
    assert "Submitting needs --confirm-preemption." in busy.stdout
    assert f"If submitted now: Would preempt: #{notebook.pk} notebook “nb”" in busy.stdout
    assert "EUR per hour while it runs." in busy.stdout
    as_json = cli(
        "submit", "job", *flags, "--gpu", "8", "--dry-run", "--json", "--", "python", "t.py"
    )
    assert '"would_preempt"' in as_json.stdout
    assert Workload.objects.count() == 1


def test_submission_that_would_preempt_names_it_and_suggests_confirming(
    cast: Cast, cli_for: CliFor
) -> None:
    notebook = running_on_every_gpu(
        one_node(cast.gpu_class), name="nb", team=cast.team, owner=cast.teammate
    )
    cli = cli_for(cast.owner)
    flags = ["--gpu-class", cast.gpu_class.name, "--image", cast.image.name, "-n", "big"]
    refused = cli("submit", "job", *flags, "--gpu", "8", "--", "python", "t.py")
    assert refused.exit_code == exits.INVALID
    assert f"#{notebook.pk} notebook 'nb' (teammate, 8 GPUs H100-80GB)" in refused.stderr
    assert "--confirm-preemption" in refused.stderr
    assert not Workload.objects.filter(name="big").exists()
    source = original(cast, gpu_milli=8000)
    again = cli("clone", str(source.pk))
    assert again.exit_code == exits.INVALID and "--confirm-preemption" in again.stderr
    assert not Workload.objects.filter(name="resnet (copy)").exists()

    done = cli(
        "submit", "job", *flags, "--gpu", "8", "--confirm-preemption", "--", "python", "t.py"
    )
    assert done.exit_code == 0, done.output
    assert Workload.objects.filter(name="big").exists()
    # "big", waiting ahead of it, takes the notebook's GPUs: a clone now only waits.
    queued = cli("clone", str(source.pk))
    assert queued.exit_code == 0, queued.output
