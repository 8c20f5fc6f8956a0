"""The status update records what the cluster says in the workload's reason column, whose
length is bounded: a longer message (a big cluster's scheduler lists every node's reason) is
clipped as a transition clips it, written once, and never makes the pass fail."""

from __future__ import annotations

import pytest

from apps.orchestration import status as st
from apps.orchestration.services.status_sync import SyncResult, _apply_observation
from apps.workloads import core as wl
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory

pytestmark = pytest.mark.django_db


def test_a_reason_longer_than_the_column_is_clipped_and_written_once() -> None:
    workload: Workload = WorkloadFactory.create(state=wl.STARTING)
    said = "Unschedulable: 0/900 nodes are available: " + "1 node(s) had untolerated taint, " * 40
    assert len(said) > 500
    first = SyncResult()
    assert _apply_observation(workload, st.Observation(None, said), first) is False
    workload.refresh_from_db()
    assert workload.last_reason == said[:500]
    assert first.reasons == 1
    again = SyncResult()
    _apply_observation(workload, st.Observation(None, said), again)
    assert again.reasons == 0  # the same words, clipped the same way: nothing to write
