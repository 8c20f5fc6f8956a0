"""Words and numbers a new user meets in the first hour, each said once and right: a state not
repeated by its reason, what was asked beside what is charged, GPU memory in GiB, a trial's
title without a second number, where a finished sweep ran, the arguments' grammar."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from apps.catalog.models import GpuClass
from apps.web.templatetags.gpus import charge_text, gib_text
from apps.web.templatetags.states import reason_beside_state
from apps.workloads import core
from tests.factories import GpuClassFactory
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def test_a_reason_that_only_repeats_the_state_is_not_shown_beside_it(portal: Portal) -> None:
    assert reason_beside_state("running", "Running") == ""
    assert reason_beside_state("Running.", "Running") == ""
    assert reason_beside_state("2 of 2 replicas ready", "Running") == "2 of 2 replicas ready"
    running = portal.workload(state=core.RUNNING, last_reason="running")
    html = portal.client(portal.cast.owner).get(f"/workloads/{running.pk}/").content.decode()
    assert '<span id="workload-reason"></span>' in html
    assert "Running running" not in html
    dashboard = portal.client(portal.cast.owner).get("/").content.decode()
    assert ">running</td>" not in dashboard


def test_gpu_memory_is_shown_in_gib() -> None:
    assert gib_text(81920) == "80 GiB"
    assert gib_text(141312) == "138 GiB"
    assert gib_text(23034) == "22.5 GiB"
    assert gib_text(None) == "—"
    rendered = Template("{% load gpus %}{{ mib|gib }}").render(Context({"mib": 143771}))
    assert rendered == "140.4 GiB"


def test_a_quarter_gpu_on_a_class_of_seven_slices_shows_what_is_asked_and_charged(
    portal: Portal,
) -> None:
    assert charge_text(asked_milli=250, charged_milli=286, sharing_mode="timeslice", slices=7) == (
        "0.25 GPU asked · charged 0.286 GPU: 2 of the 7 time slices of a GPU "
        "(sold in slices of 1/7 GPU)"
    )
    sliced = GpuClassFactory(
        name="L4-24GB", sharing_mode=GpuClass.Sharing.TIMESLICE, timeslice_replicas=7
    )
    workload = portal.workload(gpu_class=sliced, gpu_milli=250)
    assert workload.charged_milli == 286  # whole slices: ceil(250·7/1000) = 2 of 7
    html = portal.client(portal.cast.owner).get(f"/workloads/{workload.pk}/").content.decode()
    assert "0.25 GPU asked · charged 0.286 GPU: 2 of the 7 time slices of a GPU" in html
    whole = portal.workload(gpu_milli=1000)
    html = portal.client(portal.cast.owner).get(f"/workloads/{whole.pk}/").content.decode()
    assert 'id="workload-charge"' not in html  # charged as asked: nothing to explain


def test_a_trial_is_titled_by_its_sweep_and_index_once(portal: Portal) -> None:
    sweep = portal.workload(
        name="lr-bs-sweep-20", kind=core.KIND_SWEEP, state=core.SUCCEEDED, cluster=None
    )
    trial = portal.workload(name="lr-bs-sweep-20 #5", sweep=sweep, trial_index=5)
    html = portal.client(portal.cast.owner).get(f"/workloads/{trial.pk}/").content.decode()
    assert "lr-bs-sweep-20 · trial 5" in html
    assert f'#5 <span class="muted">#{trial.pk}' not in html
    assert f"lr-bs-sweep-20 #5 #{trial.pk}" not in html
    html = portal.client(portal.cast.owner).get(f"/workloads/{sweep.pk}/").content.decode()
    assert "not placed yet" not in html
    assert "each trial is placed on its own" in html


def test_a_finished_workload_never_placed_does_not_say_not_yet(portal: Portal) -> None:
    cancelled = portal.workload(state=core.CANCELLED, cluster=None)
    html = portal.client(portal.cast.owner).get(f"/workloads/{cancelled.pk}/").content.decode()
    assert ">never placed<" in html and "not placed yet" not in html


def test_unbalanced_quotes_in_the_arguments_are_said_in_good_grammar(portal: Portal) -> None:
    response = portal.client(portal.cast.owner).post(
        "/workloads/new/training/",
        {
            "action": "submit",
            "name": "quotes",
            "team": portal.cast.team.pk,
            "gpu_class": portal.cast.gpu_class.pk,
            "gpu_milli": "1000",
            "replicas": "1",
            "priority_class": "training",
            "image": portal.training_image.pk,
            "command": "python train.py",
            "args": "--name 'unfinished",
        },
    )
    html = response.content.decode()
    assert "The arguments have unbalanced quotes" in html
    assert "The arguments has" not in html


def test_the_endpoint_cost_says_its_currency_and_gpus(settings: object) -> None:
    template = Template(
        '{% load money gpus %}<dd id="endpoint-cost">{{ cost|money }} per hour now '
        "({{ replicas }} × {{ charged|gpus }} GPU)</dd>"
    )
    rendered = template.render(Context({"cost": "1.8", "replicas": 2, "charged": 250}))
    assert rendered == '<dd id="endpoint-cost">1.80 EUR per hour now (2 × 0.25 GPU)</dd>'
