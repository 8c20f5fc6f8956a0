"""Team policy, budget and right-sizing advice over the API: who may read and write, and bad
input as 400 with a message."""

from __future__ import annotations

import pytest

from apps.policies.models import TeamPolicy
from tests.api.conftest import Client
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def test_policy_round_trip_and_refusals(cast: Cast, api: Client) -> None:
    url = f"/api/v1/teams/{cast.team.slug}/policy/"
    admin = api(cast.admin, ("write",))
    body = {
        "allowed_classes": [cast.gpu_class.name],
        "max_gpu_milli_per_workload": 4000,
        "max_runtime_seconds": {"training": 7200},
        "default_idle_timeout_seconds": {"notebook": 900},
    }
    saved = admin.put(url, body, format="json")
    assert saved.status_code == 200, saved.json()
    assert saved.json()["max_runtime_seconds"] == {"training": 7200}
    assert "at most 4 GPU per workload" in saved.json()["summary"]
    read = api(cast.owner, ("read",)).get(url).json()
    assert read["allowed_classes"] == [cast.gpu_class.name]
    refused = api(cast.lead, ("write",)).put(url, body, format="json")
    assert refused.status_code == 403
    assert refused.json()["message"] == "Only platform admins set team policies."
    for bad, field in (
        ({"max_runtime_seconds": {"training": 10}}, "max_runtime_training_seconds"),
        ({"max_gpu_milli_per_workload": 0}, "max_gpu_milli_per_workload"),
        ({"allowed_images": ["nope"]}, "allowed_images"),
        ({"max_runtime_seconds": {"training": "x"}}, "max_runtime_seconds"),
    ):
        answer = admin.put(url, bad, format="json")
        assert answer.status_code == 400, (bad, answer.json())
        assert field in answer.json()["fields"], answer.json()
    assert TeamPolicy.objects.get().max_gpu_milli_per_workload == 4000


def test_budget_without_one_is_null_and_set_by_admins_only(cast: Cast, api: Client) -> None:
    url = f"/api/v1/teams/{cast.team.slug}/budget/"
    none = api(cast.owner, ("read",)).get(url)
    assert none.status_code == 200 and none.json()["amount"] is None
    assert api(cast.owner, ("read",)).get(url, {"month": "2026-13"}).status_code == 400
    lead = api(cast.lead, ("write",))
    assert lead.put(url, {"amount": "10"}, format="json").status_code == 403
    admin = api(cast.admin, ("write",))
    bad = admin.put(url, {"amount": "10", "thresholds": [50, 50]}, format="json")
    assert bad.status_code == 400 and bad.json()["fields"]["thresholds"] == ["Each threshold once."]
    ok = admin.put(url, {"amount": "10.5", "hard_stop": True}, format="json")
    assert ok.status_code == 200 and ok.json()["amount"] == "10.50"
    assert ok.json()["thresholds"] == [50, 80, 100] and ok.json()["spent"] == "0.00"
    approve = f"{url}approve/"
    assert api(cast.owner, ("write",)).post(approve).status_code == 403
    assert lead.post(approve).json()["stop_lifted"] is True


def test_advice_is_for_admins(cast: Cast, api: Client) -> None:
    assert api(cast.lead, ("read",)).get("/api/v1/advice/").status_code == 403
    rows = api(cast.admin, ("read",)).get("/api/v1/advice/", {"days": 7}).json()
    assert {r["team"] for r in rows} == {cast.team.slug, cast.other_team.slug}
    assert all(r["suggested_guaranteed_milli"] is None for r in rows)  # no history yet
    assert api(cast.admin, ("read",)).get("/api/v1/advice/", {"days": 0}).status_code == 400
    admin = api(cast.admin, ("write",))
    missing = admin.post("/api/v1/advice/apply/", {"team": "nope", "gpu_class": "x"}, format="json")
    assert missing.status_code == 404
    thin = admin.post(
        "/api/v1/advice/apply/",
        {"team": cast.team.slug, "gpu_class": cast.gpu_class.name},
        format="json",
    )
    assert thin.status_code == 400 and "at least 24 h" in thin.json()["message"]
