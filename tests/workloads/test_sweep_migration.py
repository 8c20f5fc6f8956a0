"""Sweeps recorded as one gang before trials become trials when the migration runs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("workloads", "0009_sweep_trials")]
AFTER = [("workloads", "0010_legacy_sweeps_as_trials")]


@pytest.mark.django_db(transaction=True)
def test_an_unfinished_legacy_sweep_is_queued_again_as_trials() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    team = old.get_model("accounts", "Team").objects.create(
        name="Vision", slug="vision", namespace="team-vision"
    )
    user = old.get_model("accounts", "User").objects.create(username="owner")
    image = old.get_model("catalog", "Image").objects.create(name="pt", reference="pt:1")
    h100 = old.get_model("catalog", "GpuClass").objects.create(
        name="H100", sharing_mode="whole", memory_mib=81559
    )
    Workload = old.get_model("workloads", "Workload")
    common = {
        "kind": "sweep",
        "owner": user,
        "team": team,
        "image": image,
        "gpu_class": h100,
        "gpu_milli": 1000,
        "charged_milli": 1000,
        "replicas": 6,
        "priority_class": "batch",
        "params": {"grid": {"lr": ["1", "2", "3"], "bs": ["8", "16"]}},
    }
    running = Workload.objects.create(name="running", state="running", **common)
    done = Workload.objects.create(name="done", state="succeeded", **common)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("workloads", "Workload")
    sweep = new.objects.get(pk=running.pk)
    assert (sweep.state, sweep.params["parallelism"], sweep.placement) == ("queued", 4, {})
    trials = new.objects.filter(sweep_id=running.pk).order_by("trial_index")
    assert [t.params["point"] for t in trials][:2] == [
        {"bs": "8", "lr": "1"},
        {"bs": "8", "lr": "2"},
    ]
    assert {(t.state, t.replicas) for t in trials} == {("pending", 1)}
    assert trials.count() == 6
    assert not new.objects.filter(sweep_id=done.pk).exists()
    assert new.objects.get(pk=done.pk).state == "succeeded"
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
