"""New-request forms: one per kind, fractions only where a class shares GPUs, inline errors
that keep what the user typed, request templates and the sizing helper."""

from __future__ import annotations

import re

import pytest

from apps.audit.models import AuditEvent
from apps.workloads import core
from apps.workloads.models import RequestTemplate, Workload
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def options(html: str, select_id: str) -> list[str]:
    match = re.search(rf'<select name="[^"]+"[^>]*id="{select_id}".*?</select>', html, re.S)
    assert match, f"no select #{select_id}"
    return re.findall(r'<option value="([^"]*)"', match.group(0))


def notebook_post(portal: Portal, **kw: str) -> dict[str, str]:
    data = {
        "action": "submit",
        "name": "my-notebook",
        "team": str(portal.cast.team.pk),
        "gpu_class": str(portal.mig.pk),
        "gpu_milli": "250",
        "priority_class": "development",
        "image": str(portal.notebook_image.pk),
        "env": "HF_HOME=/home/jovyan/work/.hf",
        "max_runtime_hours": "8",
        "idle_timeout_minutes": "30",
    }
    data.update(kw)
    return data


def test_each_kind_has_its_own_form(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    notebook = client.get("/workloads/new/notebook/").content.decode()
    training = client.get("/workloads/new/training/").content.decode()
    sweep = client.get("/workloads/new/sweep/").content.decode()
    assert "Idle timeout" in notebook and "Nodes" not in notebook
    assert 'name="replicas"' in training and 'name="command"' in training
    assert 'name="grid"' in sweep and "Idle timeout" not in sweep
    assert client.get("/workloads/new/inference-cluster/").status_code == 404


def test_fractions_are_offered_only_for_a_class_that_shares_gpus(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    whole = client.get(
        "/workloads/new/notebook/gpu/", {"gpu_class": portal.cast.gpu_class.pk}
    ).content.decode()
    assert options(whole, "id_gpu_milli") == ["1000", "2000", "4000", "8000"]
    shared = client.get("/workloads/new/notebook/gpu/", {"gpu_class": portal.mig.pk})
    html = shared.content.decode()
    assert options(html, "id_gpu_milli") == ["125", "250", "500", "1000"]
    assert "0.25 GPU — 0.25 × A100-80GB-MIG → MIG 2g.20gb" in html


def test_gpu_fields_preview_what_the_chosen_fraction_becomes(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    html = client.get(
        "/workloads/new/notebook/gpu/", {"gpu_class": portal.mig.pk, "gpu_milli": "500"}
    ).content.decode()
    assert "This becomes:" in html
    assert "0.5 × A100-80GB-MIG → MIG 3g.40gb" in html
    assert 'id="gpu-fields"' in html and 'hx-get="/workloads/new/notebook/gpu/"' in html


def test_only_priorities_the_user_may_use_are_offered(portal: Portal) -> None:
    member = portal.client(portal.cast.owner).get("/workloads/new/training/").content.decode()
    lead = portal.client(portal.cast.lead).get("/workloads/new/training/").content.decode()
    assert options(member, "id_priority_class") == ["training", "development", "batch"]
    assert options(lead, "id_priority_class") == ["production", "training", "development", "batch"]


def test_images_are_those_of_the_catalog_for_the_kind(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    notebook = options(client.get("/workloads/new/notebook/").content.decode(), "id_image")
    training = options(client.get("/workloads/new/training/").content.decode(), "id_image")
    assert str(portal.notebook_image.pk) in notebook
    assert str(portal.training_image.pk) not in notebook
    assert str(portal.training_image.pk) in training
    assert str(portal.notebook_image.pk) not in training


def test_submitting_a_notebook_creates_it_and_shows_its_page(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.post("/workloads/new/notebook/", notebook_post(portal))
    workload = Workload.objects.get(name="my-notebook")
    assert response.status_code == 302
    assert response["Location"] == f"/workloads/{workload.pk}/"
    assert (workload.kind, workload.gpu_milli, workload.replicas) == ("notebook", 250, 1)
    assert workload.env == {"HF_HOME": "/home/jovyan/work/.hf"}
    assert workload.max_runtime_seconds == 8 * 3600
    assert workload.idle_timeout_seconds == 30 * 60
    assert workload.owner == portal.cast.owner and workload.state == core.PENDING


def test_training_job_takes_nodes_command_arguments_and_retries(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.post(
        "/workloads/new/training/",
        {
            "action": "submit",
            "name": "llama-ft",
            "team": portal.cast.team.pk,
            "gpu_class": portal.cast.gpu_class.pk,
            "gpu_milli": "2000",
            "replicas": "2",
            "priority_class": "training",
            "image": portal.training_image.pk,
            "command": "torchrun train.py",
            "args": "--lr 3e-4 --data '/data/my set'",
            "env": "",
            "retries": "2",
        },
    )
    assert response.status_code == 302
    workload = Workload.objects.get(name="llama-ft")
    assert (workload.gpu_milli, workload.replicas, workload.retries) == (2000, 2, 2)
    assert workload.command == ["torchrun", "train.py"]
    assert workload.args == ["--lr", "3e-4", "--data", "/data/my set"]


def test_sweep_runs_one_replica_per_point_of_the_grid(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.post(
        "/workloads/new/sweep/",
        {
            "action": "submit",
            "name": "lr-sweep",
            "team": portal.cast.team.pk,
            "gpu_class": portal.cast.gpu_class.pk,
            "gpu_milli": "1000",
            "grid": "lr=0.1, 0.01\nbatch=32,64",
            "priority_class": "batch",
            "image": portal.training_image.pk,
            "command": "python sweep.py",
        },
    )
    assert response.status_code == 302
    workload = Workload.objects.get(name="lr-sweep")
    assert workload.replicas == 4
    assert workload.params == {
        "grid": {"lr": ["0.1", "0.01"], "batch": ["32", "64"]},
        "parallelism": 4,
    }
    assert workload.trials.count() == 4


def test_errors_are_shown_inline_and_nothing_typed_is_lost(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    data = notebook_post(
        portal, name="keep-me", env="GOOD=1\nnot a variable", max_runtime_hours="12.5"
    )
    response = client.post("/workloads/new/notebook/", data)
    html = response.content.decode()
    assert response.status_code == 400
    assert not Workload.objects.exists()
    assert 'class="error-summary" role="alert"' in html
    assert "Line 2: write NAME=value" in html
    assert 'value="keep-me"' in html
    assert "GOOD=1\nnot a variable</textarea>" in html
    assert 'value="12.5"' in html
    assert re.search(rf'<option value="{portal.mig.pk}" selected>', html)
    assert re.search(r'<option value="250" selected>', html)
    assert 'aria-invalid="true"' in html


def test_quota_refusal_from_the_service_lands_on_the_field_with_input_kept(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.post(
        "/workloads/new/training/",
        {
            "action": "submit",
            "name": "too-big",
            "team": portal.cast.team.pk,
            "gpu_class": portal.cast.gpu_class.pk,
            "gpu_milli": "8000",
            "replicas": "4",
            "priority_class": "training",
            "image": portal.training_image.pk,
            "command": "python train.py",
        },
    )
    html = response.content.decode()
    assert response.status_code == 400
    assert not Workload.objects.exists()
    assert "GPUs per node:" in html  # in the summary, linked to the field
    assert 'value="too-big"' in html and 'value="python train.py"' in html


def test_unbalanced_quotes_in_the_command_are_an_inline_error(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.post(
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
            "command": "python 'train.py",
        },
    )
    assert response.status_code == 400
    assert "The command has unbalanced quotes" in response.content.decode()


def test_outsider_cannot_submit_into_another_team(portal: Portal) -> None:
    client = portal.client(portal.cast.outsider)
    response = client.post("/workloads/new/notebook/", notebook_post(portal))
    assert response.status_code == 400
    assert "Select a valid choice" in response.content.decode()
    assert not Workload.objects.exists()


def test_request_saved_as_template_starts_a_new_request(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    data = notebook_post(portal, action="save-template", **{"template-name": "quarter A100"})
    response = client.post("/workloads/new/notebook/", data)
    template = RequestTemplate.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/workloads/new/notebook/?template={template.pk}"
    assert not Workload.objects.exists()  # saving a template submits nothing
    assert template.owner == portal.cast.owner and template.team is None
    assert template.values["gpu_milli"] == "250"
    page = client.get(response["Location"]).content.decode()
    assert 'value="my-notebook"' in page
    assert re.search(r'<option value="250" selected>', page)
    assert "HF_HOME=/home/jovyan/work/.hf</textarea>" in page
    assert AuditEvent.objects.filter(action="request_template.save").exists()


def test_template_without_a_name_is_refused_and_input_kept(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    data = notebook_post(portal, action="save-template", **{"template-name": ""})
    response = client.post("/workloads/new/notebook/", data)
    assert response.status_code == 400
    assert "Template name: This field is required." in response.content.decode()
    assert 'value="my-notebook"' in response.content.decode()
    assert not RequestTemplate.objects.exists()


def test_template_shared_with_the_team_is_offered_to_teammates_not_outsiders(
    portal: Portal,
) -> None:
    owner = portal.client(portal.cast.owner)
    data = notebook_post(
        portal, action="save-template", **{"template-name": "team nb", "template-share": "on"}
    )
    owner.post("/workloads/new/notebook/", data)
    template = RequestTemplate.objects.get()
    assert template.team == portal.cast.team
    teammate = portal.client(portal.cast.teammate)
    assert "team nb" in teammate.get("/workloads/new/notebook/").content.decode()
    assert teammate.get(f"/workloads/new/notebook/?template={template.pk}").status_code == 200
    # The teammate may use it, not delete it.
    teammate.post(f"/workloads/templates/{template.pk}/delete/")
    assert RequestTemplate.objects.filter(pk=template.pk).exists()
    outsider = portal.client(portal.cast.outsider)
    assert "team nb" not in outsider.get("/workloads/templates/").content.decode()
    assert outsider.get(f"/workloads/new/notebook/?template={template.pk}").status_code == 404
    assert outsider.post(f"/workloads/templates/{template.pk}/delete/").status_code == 404
    owner.post(f"/workloads/templates/{template.pk}/delete/")
    assert not RequestTemplate.objects.exists()


def test_template_link_of_another_kind_goes_to_that_kinds_form(portal: Portal) -> None:
    template = RequestTemplate.objects.create(
        name="t", owner=portal.cast.owner, kind="training", values={"name": "x"}
    )
    client = portal.client(portal.cast.owner)
    response = client.get(f"/workloads/new/notebook/?template={template.pk}")
    assert response.status_code == 302
    assert response["Location"] == f"/workloads/new/training/?template={template.pk}"


def test_sizing_helper_shows_formula_and_suggests_class_and_amount(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    response = client.get(
        "/workloads/sizing/",
        {
            "params_billions": "7",
            "precision": "bf16",
            "task": "inference",
            "context": "1024",
            "kind": "notebook",
            "inline": "1",
        },
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "<html" not in html  # a partial for htmx
    assert "weights 13.0 GiB (7 B parameters × 2 bytes)" in html
    assert "Suggested: <strong>0.25 GPU of A100-80GB-MIG</strong>" in html
    assert (
        f'hx-get="/workloads/new/notebook/gpu/?gpu_class={portal.mig.pk}&amp;gpu_milli=250"' in html
    )
    page = client.get(
        "/workloads/sizing/", {"params_billions": "7", "precision": "bf16", "task": "full"}
    ).content.decode()
    assert (
        "<html" in page
        and "Estimated GPU memory" in page
        and "hx-get" not in page.split('id="sizing-result-title"')[1]
    )


def test_sizing_link_prefills_the_gpu_fields(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    html = client.get(
        "/workloads/new/notebook/", {"gpu_class": portal.mig.pk, "gpu_milli": "500"}
    ).content.decode()
    assert re.search(rf'<option value="{portal.mig.pk}" selected>', html)
    assert re.search(r'<option value="500" selected>', html)


def test_a_multi_node_job_may_keep_its_nodes_in_one_rack_from_the_form(portal: Portal) -> None:
    client = portal.client(portal.cast.owner)
    form = client.get("/workloads/new/training/").content.decode()
    assert options(form, "id_topology") == [
        "",
        "block",
        "block:required",
        "rack",
        "rack:required",
        "nvlink",
        "nvlink:required",
    ]
    post = {
        "action": "submit",
        "name": "ddp-rack",
        "team": portal.cast.team.pk,
        "gpu_class": portal.cast.gpu_class.pk,
        "gpu_milli": "1000",
        "replicas": "2",
        "topology": "rack:required",
        "priority_class": "training",
        "image": portal.training_image.pk,
        "command": "torchrun train.py",
        "retries": "0",
    }
    assert client.post("/workloads/new/training/", post).status_code == 302
    workload = Workload.objects.get(name="ddp-rack")
    assert workload.params["topology"] == {"level": "rack", "required": True}
    # A single node cannot ask: the rule's own words, on the field.
    one = client.post("/workloads/new/training/", {**post, "name": "one", "replicas": "1"})
    assert one.status_code == 400
    assert "Only a multi-node training job (2 or more replicas) can ask for a topology." in (
        one.content.decode()
    )
    # Cloning keeps the ask.
    clone = client.get(f"/workloads/new/training/?clone={workload.pk}").content.decode()
    assert re.search(r'<option value="rack:required" selected', clone)
