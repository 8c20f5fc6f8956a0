"""A sweep's demand reads as it is charged on every page that lists it: the trials that run at
once, each of one trial's amount, not all its trials together."""

from __future__ import annotations

import pytest

from apps.workloads import core
from apps.workloads.sizing import request_label, sweep_parallelism
from tests.factories import WorkloadFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db

LABEL = "5 trials at once × 0.25 GPU {cls} (20 trials)"


def test_request_label_of_a_sweep_names_its_trials_at_once() -> None:
    assert request_label(250, 20, "L40S-48GB", parallelism=5) == LABEL.format(cls="L40S-48GB")
    assert (
        request_label(1000, 3, "H100", parallelism=1) == "1 trial at once × 1 GPU H100 (3 trials)"
    )
    assert request_label(250, 20, "L40S-48GB") == "20 × 0.25 GPU L40S-48GB"
    assert sweep_parallelism(core.KIND_SWEEP, {"parallelism": 5}) == 5
    # A trial records no parallelism: one replica of its own.
    assert sweep_parallelism(core.KIND_SWEEP, {"point": {"lr": "0.1"}}) is None
    assert sweep_parallelism(core.KIND_TRAINING, {"parallelism": 5}) is None


def test_the_list_and_the_home_page_show_a_sweep_as_its_trials_at_once(portal: Portal) -> None:
    cast = portal.cast
    WorkloadFactory(
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
        image=cast.image,
        kind=core.KIND_SWEEP,
        name="lr-sweep",
        gpu_milli=250,
        charged_milli=250,
        replicas=20,
        params={"grid": {"i": [str(i) for i in range(20)]}, "parallelism": 5},
        state=core.RUNNING,
    )
    client = portal.client(cast.owner)
    expected = LABEL.format(cls=cast.gpu_class.name)
    listed = client.get("/workloads/").content.decode()
    assert expected in listed
    assert f"5 × {cast.gpu_class.name}" not in listed
    assert expected in client.get("/").content.decode()
