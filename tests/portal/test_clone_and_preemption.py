"""Clone opens the request form filled in; a submission that would preempt the user's own or
a teammate's running work names it and asks to confirm first (the scheduler's dry run)."""

from __future__ import annotations

import html as htmlmod
import re

import pytest

from apps.workloads import core
from apps.workloads.models import Workload
from tests.portal.conftest import Portal
from tests.preemption import one_node, running_on_every_gpu

pytestmark = pytest.mark.django_db


def page(response: object) -> str:
    return htmlmod.unescape(response.content.decode())  # type: ignore[attr-defined]


def value_of(text: str, name: str) -> str:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*value="([^"]*)"', text)
    assert match, f"no input {name}"
    return match.group(1)


def training_post(portal: Portal, **kw: object) -> dict[str, object]:
    data: dict[str, object] = {
        "action": "submit",
        "name": "big-train",
        "team": portal.cast.team.pk,
        "gpu_class": portal.cast.gpu_class.pk,
        "gpu_milli": "8000",
        "replicas": "1",
        "priority_class": "training",
        "image": portal.training_image.pk,
        "command": "torchrun train.py",
        "args": "",
        "env": "",
        "retries": "0",
    }
    data.update(kw)
    return data


def test_clone_opens_the_form_of_its_kind_filled_in_and_submits_nothing(portal: Portal) -> None:
    original = portal.workload(
        name="llama-ft",
        state=core.SUCCEEDED,
        gpu_milli=2000,
        replicas=2,
        command=["torchrun", "train.py"],
        args=["--data", "/data/my set"],
        env={"WANDB_MODE": "offline"},
        max_runtime_seconds=5400,
        retries=3,
        requeue_on_preemption=False,
    )
    client = portal.client(portal.cast.owner)
    before = Workload.objects.count()
    for method in (client.get, client.post):
        response = method(f"/workloads/{original.pk}/clone/")
        assert response.status_code == 302
        assert response["Location"] == f"/workloads/new/training/?clone={original.pk}"
    assert Workload.objects.count() == before
    text = page(client.get(f"/workloads/new/training/?clone={original.pk}"))
    assert value_of(text, "name") == "llama-ft (copy)"
    assert value_of(text, "replicas") == "2"
    assert value_of(text, "command") == "torchrun train.py"
    assert value_of(text, "args") == "--data '/data/my set'"
    assert value_of(text, "max_runtime_hours") == "1.5"
    assert value_of(text, "retries") == "3"
    assert "WANDB_MODE=offline" in text
    assert re.search(r'<option value="2000" selected>', text)
    assert re.search(r'<option value="no" selected>', text)
    assert "copied from" in text and f"#{original.pk}" in text


def test_cloned_form_submits_through_the_normal_path(portal: Portal) -> None:
    original = portal.workload(
        name="nb",
        kind="notebook",
        image=portal.notebook_image,
        priority_class="development",
        idle_timeout_seconds=1800,
    )
    client = portal.client(portal.cast.owner)
    text = page(client.get(f"/workloads/new/notebook/?clone={original.pk}"))
    assert value_of(text, "name") == "nb (copy)"
    assert value_of(text, "idle_timeout_minutes") == "30"
    response = client.post(
        "/workloads/new/notebook/",
        {
            "action": "submit",
            "name": "nb (copy)",
            "team": portal.cast.team.pk,
            "gpu_class": portal.cast.gpu_class.pk,
            "gpu_milli": "1000",
            "priority_class": "development",
            "image": portal.notebook_image.pk,
            "idle_timeout_minutes": value_of(text, "idle_timeout_minutes"),
        },
    )
    assert response.status_code == 302
    copy = Workload.objects.get(name="nb (copy)")
    assert copy.idle_timeout_seconds == 1800 and copy.state == core.PENDING


def test_clone_link_of_another_kind_goes_to_that_kinds_form(portal: Portal) -> None:
    original = portal.workload(kind="notebook", image=portal.notebook_image)
    response = portal.client(portal.cast.owner).get(f"/workloads/new/training/?clone={original.pk}")
    assert response["Location"] == f"/workloads/new/notebook/?clone={original.pk}"


def test_outsider_cannot_clone_into_a_form(portal: Portal) -> None:
    original = portal.workload(name="vision-secret")
    client = portal.client(portal.cast.outsider)
    assert client.get(f"/workloads/{original.pk}/clone/").status_code == 404
    response = client.get(f"/workloads/new/training/?clone={original.pk}")
    assert response.status_code == 404 and b"vision-secret" not in response.content


def test_submission_that_would_stop_a_teammates_notebook_asks_first(portal: Portal) -> None:
    node = one_node(portal.cast.gpu_class)
    notebook = running_on_every_gpu(
        node, name="big", team=portal.cast.team, owner=portal.cast.teammate
    )
    client = portal.client(portal.cast.owner)
    before = Workload.objects.count()
    response = client.post("/workloads/new/training/", training_post(portal))
    assert response.status_code == 409
    text = page(response)
    assert "This would stop running work" in text
    assert f"#{notebook.pk} notebook “big” (teammate, 8 GPUs H100-80GB)" in text
    assert 'name="confirm_preemption"' in text
    assert value_of(text, "command") == "torchrun train.py"  # what was typed is kept
    assert Workload.objects.count() == before
    notebook.refresh_from_db()
    assert notebook.state == core.RUNNING

    confirmed = client.post(
        "/workloads/new/training/", training_post(portal, confirm_preemption="on")
    )
    assert confirmed.status_code == 302
    assert Workload.objects.get(name="big-train").state == core.PENDING


def test_own_notebook_is_named_as_yours(portal: Portal) -> None:
    node = one_node(portal.cast.gpu_class)
    mine = running_on_every_gpu(
        node, name="explore", team=portal.cast.team, owner=portal.cast.owner
    )
    response = portal.client(portal.cast.owner).post(
        "/workloads/new/training/", training_post(portal)
    )
    assert response.status_code == 409
    assert f"#{mine.pk} notebook “explore” (yours, 8 GPUs H100-80GB)" in page(response)


def test_submission_that_fits_is_not_asked_about(portal: Portal) -> None:
    node = one_node(portal.cast.gpu_class)
    running_on_every_gpu(
        node,
        team=portal.cast.team,
        owner=portal.cast.teammate,
        gpu_milli=4000,
        placement={
            "cluster": "hub",
            "replicas": [{"node": node.name, "gpus": [0, 1, 2, 3], "units": 1000}],
        },
    )
    response = portal.client(portal.cast.owner).post(
        "/workloads/new/training/", training_post(portal, gpu_milli="4000")
    )
    assert response.status_code == 302


def test_reclaiming_another_teams_borrowed_gpus_is_not_asked_about(portal: Portal) -> None:
    node = one_node(portal.cast.gpu_class)
    theirs = running_on_every_gpu(
        node, team=portal.cast.other_team, owner=portal.cast.outsider, borrowed=True
    )
    client = portal.client(portal.cast.owner)
    response = client.post("/workloads/new/training/", training_post(portal, gpu_milli="2000"))
    assert response.status_code == 302  # below its guarantee, the team reclaims: no question
    shown = page(client.get(response["Location"]))
    assert "would preempt: a notebook of nlp on borrowed capacity (8 GPUs H100-80GB)" in shown
    assert theirs.name not in shown and "outsider" not in shown
    theirs.refresh_from_db()
    assert theirs.state == core.RUNNING  # the dry run wrote nothing; the cycle decides
