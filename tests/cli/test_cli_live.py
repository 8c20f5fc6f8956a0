"""The gpupaas CLI against a live server started by the test suite."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from apps.catalog.models import Cluster, ClusterNode
from apps.orchestration.cluster_reads import LogsUnavailable
from apps.telemetry.models import UsageDay
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.services import workload_transition
from gpupaas_cli import exits
from tests.cli.conftest import Cli
from tests.factories import ImageFactory, WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db(transaction=True)

CliFor = Callable[..., Cli]


def workload_of(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "image": cast.image,
    }
    values.update(kw)
    return WorkloadFactory(**values)


def job_flags(cast: Cast) -> list[str]:
    return ["--gpu-class", cast.gpu_class.name, "--image", cast.image.name, "--gpu", "1"]


# --- configuration and errors ----------------------------------------------------------------


def test_configure_checks_the_token_and_stores_it_for_the_owner_only(
    cast: Cast, cli_for: CliFor
) -> None:
    cli = cli_for(cast.owner)
    result = cli("configure", "--url", cli.url + "/", "--token", cli.token, GPUPAAS_URL="")
    assert result.exit_code == 0, result.output
    assert "Signed in as owner." in result.stdout
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    assert json.loads(cli.config.read_text()) == {"url": cli.url, "token": cli.token}
    # Later commands read the file (no environment variables).
    later = cli("whoami", "--json", GPUPAAS_URL="", GPUPAAS_TOKEN="")
    assert later.exit_code == 0, later.output
    assert json.loads(later.stdout)["username"] == "owner"


def test_configure_with_a_refused_token_saves_nothing_and_exits_3(
    cast: Cast, cli_for: CliFor
) -> None:
    cli = cli_for()
    result = cli("configure", "--url", cli.url, "--token", "gpp_00000000_wrong")
    assert result.exit_code == exits.AUTH
    assert "refused the token" in result.stderr
    assert not cli.config.exists()


def test_unconfigured_cli_says_how_to_configure(cast: Cast, cli_for: CliFor) -> None:
    result = cli_for()("list", GPUPAAS_URL="", GPUPAAS_TOKEN="")
    assert result.exit_code == exits.AUTH
    assert "gpupaas configure" in result.stderr


def test_unreachable_server_exits_8_with_a_clear_message(cast: Cast, cli_for: CliFor) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    result = cli_for(cast.owner)("list", GPUPAAS_URL=f"http://127.0.0.1:{port}")
    assert result.exit_code == exits.NETWORK
    assert f"Cannot reach gpupaas at http://127.0.0.1:{port}" in result.stderr


def test_outsider_gets_not_found_exit_5(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast)
    result = cli_for(cast.outsider)("status", str(workload.pk))
    assert result.exit_code == exits.NOT_FOUND
    assert "Not found." in result.stderr


def test_read_token_cannot_cancel_exit_4(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast, state=core.RUNNING)
    result = cli_for(cast.owner, ("read",))("cancel", str(workload.pk))
    assert result.exit_code == exits.FORBIDDEN
    assert "read scope only" in result.stderr
    workload.refresh_from_db()
    assert workload.state == core.RUNNING


# --- submit ----------------------------------------------------------------------------------


def test_submit_job_from_flags(cast: Cast, cli_for: CliFor) -> None:
    cli = cli_for(cast.owner)
    result = cli(
        "submit", "job", "--name", "resnet", *job_flags(cast), "--replicas", "2",
        "-e", "EPOCHS=3", "--", "python", "train.py", "--lr", "0.1",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    workload = Workload.objects.get()
    assert f"as #{workload.pk}: pending" in result.stdout
    assert (workload.kind, workload.replicas, workload.gpu_milli) == ("training", 2, 1000)
    assert workload.command == ["python", "train.py", "--lr", "0.1"]
    assert workload.env == {"EPOCHS": "3"}


def test_submit_sweep_from_a_yaml_spec_with_a_flag_overriding_it(
    cast: Cast, cli_for: CliFor, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        f"kind: sweep\nname: lr-sweep\ngpu_class: {cast.gpu_class.name}\n"
        f"image: {cast.image.name}\ngpu: 1\ncommand: [python, train.py]\n"
        "grid:\n  lr: [0.1, 0.01]\n  bs: [32]\n"
    )
    result = cli_for(cast.owner)("submit", "-f", str(spec), "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["kind"] == "sweep"
    assert body["params"] == {"grid": {"lr": ["0.1", "0.01"], "bs": ["32"]}, "parallelism": 2}
    renamed = cli_for(cast.owner)("submit", "sweep", "-f", str(spec), "--name", "other", "--json")
    assert json.loads(renamed.stdout)["name"] == "other"


def test_a_sampled_sweep_from_a_spec_and_its_trials(
    cast: Cast, cli_for: CliFor, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        f"kind: sweep\nname: random\ngpu_class: {cast.gpu_class.name}\n"
        f"image: {cast.image.name}\ngpu: 1\ncommand: [python, train.py]\n"
        "ranges:\n  lr: [1.0e-5, 1.0e-3, log]\n  bs: [16, 64, int]\nsamples: 3\nseed: 7\n"
    )
    result = cli_for(cast.owner)("submit", "sweep", "-f", str(spec), "--parallelism", "2", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert (body["replicas"], body["params"]["seed"], body["params"]["parallelism"]) == (3, 7, 2)
    shown = cli_for(cast.owner)("trials", str(body["id"]))
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("random (#") and ": pending" in lines[0]
    assert len(lines) == 2 + 3 and all("pending" in line for line in lines[2:])
    as_json = json.loads(cli_for(cast.owner)("trials", str(body["id"]), "--json").stdout)
    assert [t["params"] for t in as_json["trials"]] == core.sample_points(
        {"lr": [1e-5, 1e-3, "log"], "bs": [16, 64, "int"]}, 3, 7
    )


def test_a_sweep_spec_with_an_unknown_placeholder_is_refused_and_trials_show_commands(
    cast: Cast, cli_for: CliFor, tmp_path: Path
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        f"kind: sweep\nname: lr\ngpu_class: {cast.gpu_class.name}\nimage: {cast.image.name}\n"
        "gpu: 1\ncommand: [python, train.py, '--lr={rate}']\ngrid:\n  lr: [0.1, 0.01]\n"
    )
    refused = cli_for(cast.owner)("submit", "-f", str(spec))
    assert refused.exit_code == exits.INVALID
    assert "{rate} in the command is not a parameter of this sweep" in refused.stderr
    spec.write_text(spec.read_text().replace("{rate}", "{lr}"))
    created = cli_for(cast.owner)("submit", "-f", str(spec), "--json")
    assert created.exit_code == 0, created.output
    shown = cli_for(cast.owner)("trials", str(json.loads(created.stdout)["id"]))
    assert "python train.py --lr=0.01" in shown.stdout


def test_images_say_which_clusters_hold_them_and_a_missing_one_is_refused(
    cast: Cast, cli_for: CliFor
) -> None:
    onprem = Cluster.objects.create(name="onprem", connection="in_cluster")
    ClusterNode.objects.create(
        cluster=onprem,
        name="n0",
        gpu_class=cast.gpu_class,
        gpu_count=8,
        cpu_milli=64_000,
        memory_mib=512_000,
        images=["reg.local/train:1"],
    )
    ImageFactory(name="Held", reference="reg.local/train:1", kind="training")
    cli = cli_for(cast.owner)
    shown = cli("images")
    assert shown.exit_code == 0, shown.output
    lines = {line.split()[0]: line for line in shown.stdout.splitlines()[1:]}
    assert lines["Held"].rstrip().endswith("onprem (1 node)")
    assert "onprem: not there" in shown.stdout  # the cast's own image
    refused = cli(
        "submit", "job", "--name", "t", "--gpu-class", cast.gpu_class.name,
        "--image", cast.image.name, "--gpu", "1", "--", "python",
    )  # fmt: skip
    assert refused.exit_code == exits.INVALID
    assert (
        f"The image {cast.image.name} is not available on cluster onprem; available: Held."
        in refused.stderr
    )


def test_submit_notebook(cast: Cast, cli_for: CliFor) -> None:
    result = cli_for(cast.owner)(
        "submit", "notebook", "--name", "explore", *job_flags(cast), "--idle-timeout", "3600"
    )
    assert result.exit_code == 0, result.output
    notebook = Workload.objects.get()
    assert (notebook.kind, notebook.idle_timeout_seconds) == ("notebook", 3600)


def test_refused_submission_prints_field_errors_and_exits_6(cast: Cast, cli_for: CliFor) -> None:
    result = cli_for(cast.owner)(
        "submit", "job", "--name", "x", "--gpu-class", cast.gpu_class.name,
        "--image", cast.image.name, "--gpu", "1.5", "--", "python",
    )  # fmt: skip
    assert result.exit_code == exits.INVALID
    assert "gpu_milli:" in result.stderr
    assert not Workload.objects.exists()


def test_spec_file_errors_are_usage_errors(cast: Cast, cli_for: CliFor, tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("kind: job\nname: x\ngpus: 2\n")
    result = cli_for(cast.owner)("submit", "-f", str(spec))
    assert result.exit_code == exits.USAGE
    assert "unknown field(s) gpus" in result.stderr


def test_same_idempotency_key_never_submits_twice(cast: Cast, cli_for: CliFor) -> None:
    cli = cli_for(cast.owner)
    args = ["submit", "job", "--name", "once", *job_flags(cast), "--key", "ci-42", "--json"]
    first = cli(*args, "--", "python")
    again = cli(*args, "--", "python")
    assert json.loads(first.stdout)["id"] == json.loads(again.stdout)["id"]
    assert Workload.objects.count() == 1


# --- inspect ---------------------------------------------------------------------------------


def test_list_prints_a_table_and_json(cast: Cast, cli_for: CliFor) -> None:
    workload_of(cast, name="alpha", state=core.RUNNING, gpu_milli=2000, replicas=2)
    workload_of(cast, name="beta", owner=cast.teammate)
    cli = cli_for(cast.owner)
    table = cli("list").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "KIND", "STATE", "TEAM", "OWNER", "GPU", "AGE"]
    assert "beta" in table[1]
    assert "alpha" in table[2]
    assert "2×2 H100-80GB" in table[2]
    rows = json.loads(cli("list", "--mine", "--json").stdout)
    assert [r["name"] for r in rows] == ["alpha"]


def test_status_watch_follows_until_success_and_exits_0(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast, state=core.RUNNING)

    def finish() -> None:
        time.sleep(1.0)
        workload_transition(workload=workload, to_state=core.SUCCEEDED, reason="Exit code 0.")
        connection.close()

    worker = threading.Thread(target=finish)
    worker.start()
    result = cli_for(cast.owner)("status", str(workload.pk), "--watch", "--interval", "0.2")
    worker.join()
    assert result.exit_code == exits.OK, result.output
    states = [line.split()[1] for line in result.stdout.splitlines()]
    assert states == ["running", "succeeded"]
    assert "Exit code 0." in result.stdout


def test_status_watch_of_a_failed_workload_exits_10(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast, state=core.FAILED, last_reason="OOMKilled")
    result = cli_for(cast.owner)("status", str(workload.pk), "--watch")
    assert result.exit_code == exits.WORKLOAD_FAILED
    assert "OOMKilled" in result.stdout


def test_status_watch_gives_up_after_timeout_with_exit_9(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast, state=core.QUEUED)
    result = cli_for(cast.owner)(
        "status", str(workload.pk), "--watch", "--interval", "0.1", "--timeout", "0.3"
    )
    assert result.exit_code == exits.TIMEOUT
    assert "still queued" in result.stderr


def test_logs_without_a_pod_explain_why_and_exit_6(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast)
    result = cli_for(cast.owner)("logs", str(workload.pk))
    assert result.exit_code == exits.INVALID
    assert "not been placed on a cluster yet" in result.stderr


def test_logs_follow_streams_lines(
    cast: Cast, cli_for: CliFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload = workload_of(cast, state=core.RUNNING)

    def fake_logs(**kwargs: Any) -> Iterator[str]:
        assert kwargs["follow"] is True
        assert kwargs["tail_lines"] == 3
        yield "step 1"
        yield "step 2"
        raise LogsUnavailable("The container stopped.")

    # The live server runs in this process, so the view sees the patched generator.
    monkeypatch.setattr("apps.api.views.workloads.logs.workload_logs", fake_logs)
    result = cli_for(cast.owner)("logs", str(workload.pk), "-f", "--tail", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "step 1",
        "step 2",
        "[gpupaas] log stream ended: The container stopped.",
    ]


# --- act -------------------------------------------------------------------------------------


def test_cancel_suspend_and_resume(cast: Cast, cli_for: CliFor) -> None:
    job = workload_of(cast, state=core.RUNNING)
    notebook = workload_of(cast, kind=core.KIND_NOTEBOOK, state=core.RUNNING)
    cli = cli_for(cast.owner)
    assert cli("cancel", str(job.pk), "--reason", "wrong data").stdout.strip().endswith("cancelled")
    assert cli("suspend", str(notebook.pk)).exit_code == 0
    resumed = cli("resume", str(notebook.pk), "--json")
    assert json.loads(resumed.stdout)["state"] == core.QUEUED
    again = cli("cancel", str(job.pk))
    assert again.exit_code == exits.INVALID
    assert "already cancelled" in again.stderr


def test_quota_and_gpus_tables(cast: Cast, cli_for: CliFor) -> None:
    workload_of(cast, state=core.RUNNING, gpu_milli=1000, replicas=5)
    cli = cli_for(cast.owner)
    quota = cli("quota").stdout.splitlines()
    assert quota[0].split() == ["TEAM", "GPU", "CLASS", "USED", "GUARANTEED", "LIMIT",
                                "BORROWED", "FREE"]  # fmt: skip
    assert quota[1].split() == ["vision", "H100-80GB", "5", "4", "8", "1", "3"]
    gpus = cli("gpus").stdout.splitlines()
    assert gpus[1].split()[:5] == ["H100-80GB", "79", "GiB", "whole", "27"]


def test_console_script_runs_as_a_subprocess(cast: Cast, cli_for: CliFor) -> None:
    cli = cli_for(cast.owner)
    script = Path(sys.executable).parent / "gpupaas"
    env = {**os.environ, "GPUPAAS_URL": cli.url, "GPUPAAS_TOKEN": cli.token,
           "GPUPAAS_CONFIG": str(cli.config)}  # fmt: skip
    done = subprocess.run(
        [str(script), "whoami", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["username"] == "owner"


def test_usage_of_a_team_in_a_month(cast: Cast, cli_for: CliFor) -> None:
    workload = workload_of(cast)
    UsageDay.objects.create(
        day=date(2025, 1, 3), workload=workload, team=cast.team, owner=cast.owner,
        gpu_class=cast.gpu_class, allocated_gpu_seconds=7200, used_gpu_seconds=3600,
        cost=Decimal("9"),
    )  # fmt: skip
    result = cli_for(cast.lead)("usage", "--team", "vision", "--month", "2025-01")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "2025-01-01 to 2025-02-01 (exclusive)"
    assert lines[2].split() == ["Vision", "owner", "H100-80GB", "2.0", "1.0", "50%", "9.00"]


def test_a_multi_node_job_may_ask_for_its_replicas_in_one_rack(cast: Cast, cli_for: CliFor) -> None:
    cli = cli_for(cast.owner)
    result = cli(
        "submit", "job", "--name", "ddp", *job_flags(cast), "--replicas", "2",
        "--topology", "rack:required", "--", "torchrun", "train.py",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    workload = Workload.objects.get()
    assert workload.params["topology"] == {"level": "rack", "required": True}
    refused = cli("submit", "job", "--name", "x", *job_flags(cast), "--topology", "rack:maybe")
    assert refused.exit_code != 0
    assert "--topology must look like LEVEL or LEVEL:required" in refused.output
    unknown = cli(
        "submit", "job", "--name", "y", *job_flags(cast), "--replicas", "2",
        "--topology", "galaxy", "--", "torchrun", "train.py",
    )  # fmt: skip
    assert unknown.exit_code != 0
    assert "galaxy" in unknown.output, unknown.output
    assert Workload.objects.count() == 1
