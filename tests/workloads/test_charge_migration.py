"""The migration that records charges computes them for the workloads already recorded."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("workloads", "0006_workload_live_indexes")]
AFTER = [("workloads", "0007_workload_charged_milli")]


@pytest.mark.django_db(transaction=True)
def test_existing_workloads_are_charged_what_their_class_grants() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    team = old.get_model("accounts", "Team").objects.create(
        name="Vision", slug="vision", namespace="team-vision"
    )
    user = old.get_model("accounts", "User").objects.create(username="owner")
    image = old.get_model("catalog", "Image").objects.create(name="pt", reference="pt:1")
    GpuClass = old.get_model("catalog", "GpuClass")
    sliced = GpuClass.objects.create(
        name="L4", sharing_mode="timeslice", timeslice_replicas=4, memory_mib=24576
    )
    whole = GpuClass.objects.create(name="H100", sharing_mode="whole", memory_mib=81559)
    Workload = old.get_model("workloads", "Workload")
    common = {"kind": "training", "owner": user, "team": team, "image": image}
    tiny = Workload.objects.create(name="tiny", gpu_class=sliced, gpu_milli=1, **common)
    big = Workload.objects.create(name="big", gpu_class=whole, gpu_milli=2000, replicas=2, **common)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new = executor.loader.project_state(AFTER).apps.get_model("workloads", "Workload")
    assert new.objects.get(pk=tiny.pk).charged_milli == 250
    assert new.objects.get(pk=big.pk).charged_milli == 2000
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
