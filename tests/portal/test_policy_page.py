"""A team's policy in the portal: members see it, platform admins set it in hours, minutes and
GPUs, and bad input is a form error."""

from __future__ import annotations

import pytest

from apps.audit.models import AuditEvent
from apps.policies.models import TeamPolicy
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db


def test_admin_sets_the_policy_members_read_it_outsiders_get_404(portal: Portal) -> None:
    cast = portal.cast
    url = f"/teams/{cast.team.slug}/policy/"
    assert portal.client(cast.outsider).get(url).status_code == 404
    assert "No restrictions" in portal.client(cast.owner).get(url).content.decode()
    answer = portal.client(cast.admin).post(
        url + "set/",
        {
            "allowed_classes": [portal.mig.name],
            "max_gpus": "0.5",
            "max_runtime_training_hours": "1.5",
            "idle_timeout_notebook_minutes": "45",
            "exclusive_classes": [portal.mig.name],
        },
    )
    assert answer.status_code == 302
    policy = TeamPolicy.objects.get(team=cast.team)
    assert policy.max_gpu_milli_per_workload == 500
    assert policy.max_runtime_training_seconds == 5400
    assert policy.idle_timeout_notebook_seconds == 2700
    assert [c.name for c in policy.allowed_classes.all()] == [portal.mig.name]
    assert AuditEvent.objects.filter(action="policy.create", actor=cast.admin).exists()
    page = portal.client(cast.owner).get(url).content.decode()
    assert "GPU classes: A100-80GB-MIG" in page and "training jobs run at most 90 min" in page
    assert "Save policy" not in page
    team_page = portal.client(cast.owner).get(f"/teams/{cast.team.slug}/").content.decode()
    assert url in team_page


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_gpus", "0.0005", "decimal places"),
        (
            "max_runtime_training_hours",
            "0",
            "A maximum runtime of training jobs of at least 0.02 hours (72 seconds).",
        ),
        (
            "idle_timeout_notebook_minutes",
            "2",
            "An idle timeout of notebooks of at least 5 minutes.",
        ),
        ("idle_timeout_notebook_minutes", "99999", "at most 43,200 minutes (30 days)"),
        ("allowed_classes", "Z80", "Select a valid choice"),
        ("allowed_images", "\x00", "Null characters are not allowed"),
    ],
)
def test_bad_policy_input_is_a_form_error(
    portal: Portal, field: str, value: str, message: str
) -> None:
    cast = portal.cast
    answer = portal.client(cast.admin).post(f"/teams/{cast.team.slug}/policy/set/", {field: value})
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert "Ensure this value" not in answer.content.decode()
    assert not TeamPolicy.objects.exists()


def test_members_cannot_set_the_policy(portal: Portal) -> None:
    cast = portal.cast
    answer = portal.client(cast.lead).post(
        f"/teams/{cast.team.slug}/policy/set/", {"max_gpus": "64"}
    )
    assert answer.status_code == 403 and not TeamPolicy.objects.exists()
