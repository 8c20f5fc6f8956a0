"""A cluster that is starting or down is said once in the worker's log, not at every pass."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from apps.catalog.models import Cluster
from apps.orchestration import tasks
from apps.orchestration.errors import ClusterConfigError

pytestmark = pytest.mark.django_db


def test_a_cluster_still_starting_is_said_once_then_quiet_until_it_answers(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    Cluster.objects.create(name="starting", kubeconfig_path="/nonexistent/admin.kubeconfig")
    up = {"now": False}

    def fake_pass(*, cluster: Any) -> None:
        if cluster.name == "starting" and not up["now"]:
            raise ClusterConfigError("kubeconfig '/nonexistent/admin.kubeconfig' cannot be read")

    monkeypatch.setattr(tasks, "_failing", {})
    with caplog.at_level(logging.WARNING, logger="apps.orchestration.tasks"):
        for _ in range(5):
            tasks._each_cluster(fake_pass)
        up["now"] = True
        tasks._each_cluster(fake_pass)
        tasks._each_cluster(fake_pass)
    said = [r.getMessage() for r in caplog.records if "starting" in r.getMessage()]
    assert len(said) == 2, said
    assert "cannot be read" in said[0] and "said once" in said[0]
    assert said[1] == "cluster starting: reachable again"
