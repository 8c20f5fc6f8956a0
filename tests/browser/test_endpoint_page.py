"""The endpoint page in Chromium: URL, replicas over time against load, keys (a new one shown
once), scaling and rollout forms, every field labelled; a screenshot for the record."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.utils import timezone
from playwright.sync_api import expect

from apps.serving.models import EndpointKey, EndpointSample
from apps.workloads import core
from tests.browser.test_accessibility import UNLABELLED_FIELDS
from tests.factories import ImageFactory
from tests.portal.conftest import Portal

LOAD = [2, 4, 9, 16, 24, 31, 38, 36, 30, 22, 14, 8, 5, 3, 2, 1]


def test_the_endpoint_page_shows_its_url_replicas_over_time_and_keys(
    portal: Portal, signed_in: Callable[..., Any], artifacts_dir: Path, settings: Any
) -> None:
    settings.ENDPOINT_HOST = "serve.gpupaas.test"
    image = ImageFactory(
        name="vLLM server", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving"
    )
    endpoint = portal.workload(
        name="support-llm",
        owner=portal.cast.lead,
        image=image,
        kind=core.KIND_INFERENCE,
        priority_class=core.PRIORITY_PRODUCTION,
        state=core.RUNNING,
        replicas=3,
        last_reason="3 of 3 replicas ready",
        params={
            "endpoint": {
                "port": 8000,
                "health_path": "/health",
                "min_replicas": 1,
                "max_replicas": 4,
                "target_replicas": 4,
                "model_path": "/team/models/llama-3-8b",
                "scale_metric": "rps",
                "scale_target": 10.0,
                "revision": 2,
                "scale_waiting": "Production work runs only on guaranteed quota: Vision uses 4 of "
                "its 4 GPU guarantee on H100-80GB, and this needs 1 more.",
                "rollout": {
                    "revision": 2,
                    "state": "complete",
                    "message": "3 of 3 replicas run the new revision",
                },
            }
        },
    )
    start = timezone.now() - timedelta(minutes=len(LOAD))
    replicas = 1
    for i, rps in enumerate(LOAD):
        wanted = min(4, max(1, -(-rps // 10)))
        EndpointSample.objects.create(
            workload=endpoint,
            at=start + timedelta(minutes=i),
            replicas=replicas,
            target=wanted,
            requests_per_second=float(rps),
            latency_p95_seconds=0.12 + rps / 400,
            gpu_utilisation=min(95.0, 20 + rps * 2.0),
            decision="" if wanted == replicas else f"{rps} requests/s: {replicas} → {wanted}",
        )
        replicas = wanted
    EndpointKey.objects.create(
        team=portal.cast.team,
        endpoint_id=endpoint.pk,
        name="support bot",
        lookup="1a2b3c4d",
        digest="f" * 64,
        created_by=portal.cast.lead,
    )

    page = signed_in(portal.cast.lead)
    page.goto(f"{page.base_url}/workloads/{endpoint.pk}/")
    panel = page.locator("#endpoint")
    expect(panel.locator("#endpoint-url")).to_have_text(
        f"https://serve.gpupaas.test/endpoints/{portal.cast.team.namespace}/{endpoint.pk}/"
    )
    expect(panel.locator("#endpoint-replicas")).to_contain_text("3 running of 4 asked")
    expect(panel.locator("#endpoint-waiting")).to_contain_text("only on guaranteed quota")
    expect(panel.locator(".replica-chart .bar")).to_have_count(len(LOAD))
    expect(panel.locator("#endpoint-keys")).to_contain_text("gpe_1a2b3c4d_…")
    assert page.evaluate(UNLABELLED_FIELDS) == []

    page.get_by_label("New key for").fill("nightly batch")
    page.get_by_role("button", name="Create key").click()
    shown = page.locator("#new-key")
    expect(shown).to_contain_text("not shown again")
    key = shown.locator(".mono").inner_text().strip()
    assert key.startswith("gpe_")
    page.screenshot(path=str(artifacts_dir / "endpoint.png"), full_page=True)
    page.reload()
    expect(page.locator("#new-key")).to_have_count(0)
    assert key not in page.content()
