"""The request form knows the outcome: only the classes the team may use (the others named
with the reason), the quota left and the cost per hour in the platform's currency, and a live
verdict that is the API's ``?dry_run=true`` answer."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from apps.accounts.models import User
from apps.accounts.services import api_token_create
from apps.catalog.models import GpuClass
from apps.workloads.models import Workload
from tests.portal.conftest import Portal
from tests.portal.test_request_forms import notebook_post, options
from tests.preemption import one_node, running_on_every_gpu

pytestmark = pytest.mark.django_db


def api(user: User) -> APIClient:
    _, plaintext = api_token_create(actor=user, name="t", scopes=["write"], expires_at=None)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def headline(html: str) -> str:
    match = re.search(r'id="verdict-headline"[^>]*>(.*?)</p>', html, re.S)
    assert match, html
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


@pytest.fixture
def l40s() -> GpuClass:
    """An enabled class nobody has quota for."""
    return GpuClass.objects.create(
        name="L40S-48GB",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        sharing_mode=GpuClass.Sharing.TIMESLICE,
        timeslice_replicas=4,
        capacity_gpus=8,
    )


def test_only_classes_the_team_may_use_are_offered_and_the_others_explained(
    portal: Portal, l40s: GpuClass
) -> None:
    html = portal.client(portal.cast.owner).get("/workloads/new/notebook/").content.decode()
    offered = options(html, "id_gpu_class")
    assert str(l40s.pk) not in offered
    assert sorted(offered) == sorted([str(portal.cast.gpu_class.pk), str(portal.mig.pk)])
    unavailable = html.split('id="gpu-classes-unavailable"')[1].split("</div>")[0]
    assert "L40S-48GB" in unavailable and "Vision has no quota for it" in unavailable
    assert "ask a platform admin for one" in unavailable


def test_an_admin_is_told_how_to_give_quota_not_to_ask_an_admin(
    portal: Portal, l40s: GpuClass
) -> None:
    html = portal.client(portal.cast.admin).get("/workloads/new/notebook/").content.decode()
    unavailable = html.split('id="gpu-classes-unavailable"')[1].split("</div>")[0]
    assert "give it one under Team quotas in the admin" in unavailable
    assert "ask a platform admin" not in unavailable


@override_settings(PLATFORM_CURRENCY="CHF")
def test_gpu_fields_show_quota_left_and_cost_in_the_platform_currency(portal: Portal) -> None:
    portal.mig.hourly_cost = 4
    portal.mig.save()
    html = (
        portal.client(portal.cast.owner)
        .get(
            "/workloads/new/notebook/gpu/",
            {"gpu_class": portal.mig.pk, "gpu_milli": 250, "team": portal.cast.team.pk},
        )
        .content.decode()
    )
    assert "4 of 4 GPU left in Vision&#x27;s limit on A100-80GB-MIG" in html
    # 0.25 GPU maps to the 2g.20gb profile, charged 2/7 of a GPU: what the cluster grants.
    assert re.search(r'id="gpu-cost".*?1\.\d\d CHF per hour per replica', html, re.S), html


def test_live_verdict_starts_now_on_a_free_node_and_records_nothing(portal: Portal) -> None:
    one_node(portal.cast.gpu_class)
    data = notebook_post(portal, gpu_class=str(portal.cast.gpu_class.pk), gpu_milli="1000")
    response = portal.client(portal.cast.owner).post("/workloads/new/notebook/verdict/", data)
    assert response.status_code == 200
    html = response.content.decode()
    node = f"{portal.cast.gpu_class.name.lower()}-0"
    assert headline(html) == f"Starts now on {node}."
    assert re.search(r'id="verdict-cost">\d+\.\d\d EUR per hour', html), html
    assert not Workload.objects.exists()


def test_live_verdict_is_the_api_dry_run_answer(portal: Portal) -> None:
    cast = portal.cast
    notebook = running_on_every_gpu(
        one_node(cast.gpu_class), name="big", team=cast.team, owner=cast.teammate
    )
    data = notebook_post(
        portal,
        gpu_class=str(cast.gpu_class.pk),
        gpu_milli="1000",
        priority_class="training",
        name="urgent",
    )
    client = portal.client(cast.lead)  # a lead may use the training class for a notebook
    html = client.post("/workloads/new/notebook/verdict/", data).content.decode()
    body = {
        "kind": "notebook",
        "name": "urgent",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": portal.notebook_image.name,
        "gpu_milli": 1000,
        "priority_class": "training",
        "env": {"HF_HOME": "/home/jovyan/work/.hf"},
        "max_runtime_seconds": 8 * 3600,
        "idle_timeout_seconds": 30 * 60,
    }
    answer = api(cast.lead).post("/api/v1/workloads/?dry_run=true", body, "json").json()
    assert answer["verdict"]["outcome"] == "preempts"
    assert headline(html) == answer["verdict"]["headline"]
    assert f"#{notebook.pk} notebook “big”" in headline(html)
    assert Workload.objects.count() == 1


def test_live_verdict_lists_the_rules_problems(portal: Portal) -> None:
    data = notebook_post(portal, name="bad\u202ename", env="LD_PRELOAD=x.so")
    html = portal.client(portal.cast.owner).post("/workloads/new/notebook/verdict/", data)
    text = html.content.decode()
    assert 'data-outcome="refused"' in text
    assert "bidirectional" in text and "LD_PRELOAD" in text


def test_live_verdict_of_a_class_without_quota_says_so(portal: Portal, l40s: GpuClass) -> None:
    data = notebook_post(portal, gpu_class=str(l40s.pk), gpu_milli="250")
    text = portal.client(portal.cast.owner).post("/workloads/new/notebook/verdict/", data)
    assert "Vision has no quota for L40S-48GB; ask a platform admin for one." in (
        text.content.decode()
    )


def test_outsider_verdict_for_another_team_is_refused(portal: Portal) -> None:
    data = notebook_post(portal)  # the cast's team, which the outsider is not in
    response = portal.client(portal.cast.outsider).post("/workloads/new/notebook/verdict/", data)
    assert response.status_code == 200
    assert 'data-outcome="refused"' in response.content.decode()
    assert "Starts now" not in response.content.decode()


def test_sizing_helper_suggests_only_classes_the_team_may_use(
    portal: Portal, l40s: GpuClass
) -> None:
    query = {"params_billions": "1", "precision": "bf16", "task": "inference", "context": "512"}
    html = portal.client(portal.cast.owner).get("/workloads/sizing/", query).content.decode()
    assert "Use 0.25 GPU L40S-48GB" not in html and "L40S-48GB" not in html.split("<table")[-1]
    admin = portal.client(portal.cast.admin).get("/workloads/sizing/", query).content.decode()
    assert "L40S-48GB" in admin


def test_sizing_helper_shows_costs_in_the_platform_currency_and_the_13b_full_fine_tune(
    portal: Portal,
) -> None:
    query = {"params_billions": "13", "precision": "bf16", "task": "full"}
    html = portal.client(portal.cast.owner).get("/workloads/sizing/", query).content.decode()
    assert "optimizer states 96.9 GiB" in html
    assert "Suggested: <strong>4 GPUs of H100-80GB</strong>" in html
    assert re.search(r"\(\d+\.\d\d EUR per hour\)", html), html


def test_a_request_not_yet_ranked_is_not_told_that_nothing_will_free_enough(
    portal: Portal,
) -> None:
    pending = portal.workload(state="pending", queue_position=None, estimated_start_at=None)
    html = portal.client(portal.cast.owner).get(f"/workloads/{pending.pk}/").content.decode()
    estimate = html.split('id="estimated-start"')[1].split("</dd>")[0]
    assert "decided by the next scheduling cycle" in estimate
    assert "free enough" not in html
    ranked = portal.workload(state="queued", queue_position=2, estimated_start_at=None)
    html = portal.client(portal.cast.owner).get(f"/workloads/{ranked.pk}/").content.decode()
    assert "no estimate (the reason says why)" in html
