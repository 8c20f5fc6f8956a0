"""``gpupaas policy``, ``budget`` and ``advice`` against the live test server."""

from __future__ import annotations

import json

import pytest

from apps.budgets.models import Budget
from apps.policies.models import TeamPolicy
from apps.quotas.models import TeamQuota
from gpupaas_cli import exits, spec
from tests.cli.test_cli_live import CliFor
from tests.plugins.cast import Cast


def test_durations_read_in_the_usual_units() -> None:
    assert [spec.duration_seconds(t, "x") for t in ("90", "30m", "48h", "2d")] == [
        90,
        1800,
        172800,
        172800,
    ]
    for bad in ("", "2w", "h", "-1h", "1.5h"):
        with pytest.raises(spec.SpecError, match="write a duration"):
            spec.duration_seconds(bad, "x")


def test_admin_sets_a_policy_members_read_it_and_cannot_change_it(
    cast: Cast, cli_for: CliFor
) -> None:
    admin = cli_for(cast.admin)
    result = admin(
        "policy",
        "set",
        "--team",
        cast.team.slug,
        "--class",
        cast.gpu_class.name,
        "--max-gpus",
        "2",
        "--max-runtime",
        "training=48h",
        "--idle-timeout",
        "notebook=30m",
    )
    assert result.exit_code == 0, result.output
    policy = TeamPolicy.objects.get(team=cast.team)
    assert (policy.max_gpu_milli_per_workload, policy.max_runtime_training_seconds) == (
        2000,
        172800,
    )
    assert policy.idle_timeout_notebook_seconds == 1800
    member = cli_for(cast.owner)
    shown = member("policy", "show", "--team", cast.team.slug)
    assert shown.exit_code == 0
    assert "at most 2 GPU per workload" in shown.output
    assert "training jobs run at most 2 days" in shown.output
    refused = member("policy", "set", "--team", cast.team.slug, "--max-gpus", "64")
    assert refused.exit_code == exits.FORBIDDEN, refused.output
    assert "Only platform admins set team policies." in refused.stderr
    hidden = cli_for(cast.outsider)("policy", "show", "--team", cast.team.slug)
    assert hidden.exit_code == exits.NOT_FOUND
    unknown = admin("policy", "set", "--team", cast.team.slug, "--class", "Z80")
    assert unknown.exit_code == exits.INVALID and "No such name: Z80." in unknown.stderr
    bad_kind = admin("policy", "set", "--team", cast.team.slug, "--max-runtime", "batch=1h")
    assert bad_kind.exit_code == exits.USAGE and "the kind is one of" in bad_kind.stderr


def test_budget_set_show_and_a_leads_approval(cast: Cast, cli_for: CliFor) -> None:
    admin = cli_for(cast.admin)
    set_ = admin(
        "budget",
        "set",
        "--team",
        cast.team.slug,
        "--amount",
        "40000",
        "--threshold",
        "80",
        "--threshold",
        "100",
        "--hard-stop",
        "--json",
    )
    assert set_.exit_code == 0, set_.output
    body = json.loads(set_.output)
    assert (body["amount"], body["thresholds"], body["hard_stop"]) == ("40000.00", [80, 100], True)
    shown = cli_for(cast.owner)("budget", "show", "--team", cast.team.slug)
    assert "Budget of" in shown.output and "40000.00 EUR" in shown.output
    assert "Hard stop: on" in shown.output
    assert cli_for(cast.owner)("budget", "approve", "--team", cast.team.slug).exit_code == (
        exits.FORBIDDEN
    )
    approved = cli_for(cast.lead)("budget", "approve", "--team", cast.team.slug)
    assert approved.exit_code == 0, approved.output
    assert Budget.objects.get().stop_lifted_by == cast.lead
    bad = admin("budget", "set", "--team", cast.team.slug, "--amount", "-3")
    assert bad.exit_code == exits.INVALID and "amount" in bad.stderr


def test_advice_is_listed_and_refused_without_history(cast: Cast, cli_for: CliFor) -> None:
    admin = cli_for(cast.admin)
    listed = admin("advice", "list", "--days", "7")
    assert listed.exit_code == 0, listed.output
    assert cast.team.slug in listed.output and "P95 USED" in listed.output
    thin = admin("advice", "apply", "--team", cast.team.slug, "--class", cast.gpu_class.name)
    assert thin.exit_code == exits.INVALID and "at least 24 h are needed" in thin.stderr
    assert TeamQuota.objects.get(team=cast.team).limit_milli == 8000
    member = cli_for(cast.owner)("advice", "list")
    assert member.exit_code == exits.FORBIDDEN and "platform admins" in member.stderr
