"""Several identity providers (OIDC_PROVIDERS) and the linking rule, on plain data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from apps.accounts.providers import (
    DEFAULT_KEY,
    Holder,
    Provider,
    ProvidersError,
    TeamMapping,
    link_decision,
    parse_providers,
    provider_for_issuer,
    provider_for_key,
    single_provider,
)

ROOT = Path(__file__).resolve().parents[2]


def entry(key: str = "corp", **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "name": key.title(),
        "issuer": f"https://{key}.example.com",
        "client_id": "gpupaas",
        "client_secret": "s3cret",
        **extra,
    }


def test_each_provider_brings_its_own_client_groups_format_teams_and_admin_groups() -> None:
    corp, partner = parse_providers(
        json.dumps(
            [
                entry("corp", admin_groups=["gpupaas-admins"], operator_groups="ops, sre"),
                entry(
                    "partner",
                    name="Partner ID",
                    client_secret_env="PARTNER_SECRET",
                    groups_format="path",
                    groups_claim="roles",
                    teams={
                        "vision": {"member": "/p/vision", "lead": "/p/vision-leads"},
                        "nlp": "/p/nlp",
                    },
                    link_by_verified_email=True,
                    endpoints={"token": "https://partner.example.com/token"},
                ),
            ]
        ),
        env={"PARTNER_SECRET": "from-env"},
    )
    assert corp.admin_groups == ("gpupaas-admins",)
    assert corp.role_groups["operator"] == ("ops", "sre")
    assert corp.teams is None  # the teams' own IdP group fields
    assert corp.link_by_verified_email is False
    assert partner.name == "Partner ID"
    assert partner.client_secret == "from-env"
    assert (partner.groups_format, partner.groups_claim) == ("path", "roles")
    assert partner.teams == {
        "vision": TeamMapping(member="/p/vision", lead="/p/vision-leads"),
        "nlp": TeamMapping(member="/p/nlp"),
    }
    assert partner.endpoints == {"OIDC_OP_TOKEN_ENDPOINT": "https://partner.example.com/token"}
    assert provider_for_issuer((corp, partner), "https://partner.example.com") is partner
    assert provider_for_key((corp, partner), "corp") is corp
    assert provider_for_key((corp, partner), None) is None  # several: someone must choose
    assert provider_for_key((corp,), None) is corp


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "non-empty JSON list"),
        (json.dumps([entry(key="Corp SSO")]), "key must be"),
        (json.dumps([entry(issuer="corp.example.com")]), "issuer must be an http(s) URL"),
        (json.dumps([{**entry(), "client_secret": ""}]), "client_secret must be"),
        (json.dumps([{k: v for k, v in entry().items() if k != "client_id"}]), "has no client_id"),
        (json.dumps([entry(client_secret_env="NOPE")]), "NOPE is unset"),
        (json.dumps([entry(groups_format="dn")]), "groups_format must be"),
        (json.dumps([entry(teams={"vision": {"owner": "x"}})]), "teams.vision must be"),
        (json.dumps([entry(link_by_verified_email="yes")]), "true or false"),
        (json.dumps([entry(endpoints={"logout": "x"})]), "endpoints may name only"),
        (json.dumps([entry(colour="blue")]), "unknown field(s) colour"),
        (json.dumps([entry("a"), entry("a", issuer="https://b.example.com")]), "two providers"),
        (json.dumps([entry("a"), entry("b", issuer="https://a.example.com")]), "the issuer"),
    ],
)
def test_a_setting_that_cannot_be_used_is_refused_naming_the_entry_and_field(
    value: str, words: str
) -> None:
    with pytest.raises(ProvidersError) as refused:
        parse_providers(value, env={})
    assert words in str(refused.value)


def test_the_single_provider_of_the_oidc_settings_is_one_provider() -> None:
    settings = SimpleNamespace(
        OIDC_RP_CLIENT_ID="portal",
        OIDC_OP_ISSUER="https://sso.example.com",
        OIDC_RP_CLIENT_SECRET="x",
        OIDC_PROVIDER_NAME="Example SSO",
        OIDC_RP_SCOPES="openid email groups",
        OIDC_GROUPS_CLAIM="groups",
        OIDC_GROUPS_FORMAT="name",
        OIDC_ADMIN_GROUPS=["admins"],
        OIDC_OPERATOR_GROUPS=[],
        OIDC_AUDITOR_GROUPS=["audit"],
        OIDC_BILLING_GROUPS=[],
        OIDC_RP_SIGN_ALGO="RS256",
        OIDC_OP_TOKEN_ENDPOINT="https://sso.example.com/token",
        OIDC_LINK_BY_VERIFIED_EMAIL=False,
    )
    provider = single_provider(settings)
    assert provider is not None
    assert (provider.key, provider.name, provider.groups_format) == (
        DEFAULT_KEY,
        "Example SSO",
        "name",
    )
    assert provider.role_groups["auditor"] == ("audit",)
    assert provider.endpoints == {"OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token"}
    settings.OIDC_OP_ISSUER = ""
    assert single_provider(settings) is None


PARTNER = Provider(
    key="partner", name="Partner ID", issuer="https://p", client_id="c", client_secret="s"
)
LINKING = Provider(
    key="partner",
    name="Partner ID",
    issuer="https://p",
    client_id="c",
    client_secret="s",
    link_by_verified_email=True,
)
VERIFIED = {"email": "alice@example.com", "email_verified": True}
ALICE = Holder(user_id=7, provider_names=("Corp SSO",))


def test_a_verified_email_of_another_providers_account_is_refused_naming_the_fix() -> None:
    decision = link_decision(provider=PARTNER, claims=VERIFIED, holders=[ALICE], contact="ops")
    assert decision.action == "refuse"
    assert decision.reason == (
        "A gpupaas account already signs in with alice@example.com through Corp SSO. Sign in "
        "there, or ask ops to allow linking accounts from Partner ID by verified e-mail "
        '("link_by_verified_email" for provider "partner" in OIDC_PROVIDERS).'
    )


def test_a_provider_an_admin_allowed_links_a_verified_email_to_that_account() -> None:
    decision = link_decision(provider=LINKING, claims=VERIFIED, holders=[ALICE], contact="ops")
    assert (decision.action, decision.user_id) == ("link", 7)


@pytest.mark.parametrize(
    "claims",
    [
        {"email": "alice@example.com", "email_verified": False},
        {"email": "alice@example.com"},
        {"email": "alice@example.com", "email_verified": "no"},
        {"email": ""},
    ],
    ids=["unverified", "not said", "not true", "no e-mail"],
)
def test_an_unverified_email_never_links_and_never_blocks(claims: dict[str, Any]) -> None:
    for provider in (PARTNER, LINKING):
        decision = link_decision(provider=provider, claims=claims, holders=[ALICE], contact="ops")
        assert decision.action == "new"


def test_a_verified_email_as_the_string_true_counts_as_verified() -> None:
    claims = {"email": "alice@example.com", "email_verified": "true"}
    assert link_decision(provider=LINKING, claims=claims, holders=[ALICE], contact="x").action == (
        "link"
    )


def test_an_email_held_by_two_accounts_is_never_linked_to_either() -> None:
    holders = [ALICE, Holder(user_id=8, provider_names=("Lab SSO",))]
    decision = link_decision(provider=LINKING, claims=VERIFIED, holders=holders, contact="ops")
    assert decision.action == "refuse"
    assert "More than one gpupaas account" in decision.reason
    assert "Corp SSO and Lab SSO" in decision.reason


def test_nobody_holding_the_email_is_a_new_account() -> None:
    assert link_decision(provider=PARTNER, claims=VERIFIED, holders=[], contact="x").action == "new"


def _check(*command: str, **env: str) -> subprocess.CompletedProcess[str]:
    unset = {"SECRET_KEY", "DEBUG", "DATABASE_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    clean = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("OIDC_")}
    return subprocess.run(
        [sys.executable, "manage.py", *(command or ("check",))],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "gpupaas.settings.dev", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_portal_does_not_start_with_a_providers_setting_it_cannot_use() -> None:
    bad = _check(OIDC_PROVIDERS=json.dumps([entry(groups_format="dn")]))
    assert bad.returncode != 0
    assert "OIDC_PROVIDERS[0] (corp): groups_format must be auto, path or name." in bad.stderr
    both = _check(
        OIDC_PROVIDERS=json.dumps([entry()]),
        OIDC_RP_CLIENT_ID="portal",
        OIDC_OP_ISSUER="https://sso.example.com",
        OIDC_RP_CLIENT_SECRET="x",
    )
    assert both.returncode != 0
    assert "not both" in both.stderr
    good = _check(OIDC_PROVIDERS=json.dumps([entry(), entry("partner")]))
    assert good.returncode == 0, good.stderr
    loaded = _check(
        "shell",
        "-c",
        "from django.conf import settings; from apps.accounts.oidc import configured_providers;"
        " print(settings.OIDC_ENABLED, [p.key for p in configured_providers()])",
        OIDC_PROVIDERS=json.dumps([entry(), entry("partner")]),
    )
    assert loaded.stdout.strip().splitlines()[-1] == "True ['corp', 'partner']", loaded.stderr
