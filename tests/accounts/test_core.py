from __future__ import annotations

import pytest

from apps.accounts import core


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Vision", "vision"),
        ("Vision & Robotics", "vision-robotics"),
        ("  ML   Ops ", "ml-ops"),
        ("Équipe Über", "equipe-uber"),
        ("a" * 80, "a" * core.SLUG_MAX_LENGTH),
    ],
)
def test_slug_from_name_makes_dns_labels(name: str, slug: str) -> None:
    assert core.slug_from_name(name) == slug
    assert core.slug_problem(core.slug_from_name(name)) is None


def test_names_differing_only_in_dropped_characters_share_a_slug() -> None:
    # This is why uniqueness is enforced on slug and namespace, never assumed from names.
    assert core.slug_from_name("ML_Ops") == core.slug_from_name("ml ops") == "ml-ops"
    assert core.slug_from_name("R&D") == core.slug_from_name("R.D") == "r-d"


@pytest.mark.parametrize("slug", ["", "-x", "x-", "UPPER", "a_b", "a.b", "a" * 59])
def test_slug_problem_rejects_what_cannot_name_a_namespace(slug: str) -> None:
    assert core.slug_problem(slug) is not None


def test_namespace_is_team_prefix_plus_slug() -> None:
    assert core.namespace_for_slug("vision") == "team-vision"
    assert len(core.namespace_for_slug("a" * core.SLUG_MAX_LENGTH)) == 63


TEAMS = [
    core.TeamGroups(team_id=1, member_group="g-vision", lead_group="g-vision-leads"),
    core.TeamGroups(team_id=2, member_group="g-nlp"),
]


def test_two_groups_give_two_memberships() -> None:
    plan = core.plan_memberships(
        groups=["g-vision", "g-nlp"], teams=TEAMS, current_idp_team_ids=[], admin_groups=[]
    )
    assert plan.roles == {1: core.ROLE_MEMBER, 2: core.ROLE_MEMBER}
    assert plan.remove_team_ids == frozenset()
    assert plan.is_admin is False


def test_lead_group_makes_a_lead() -> None:
    plan = core.plan_memberships(
        groups=["g-vision-leads"], teams=TEAMS, current_idp_team_ids=[], admin_groups=[]
    )
    assert plan.roles == {1: core.ROLE_LEAD}


def test_leaving_a_group_removes_the_membership() -> None:
    plan = core.plan_memberships(
        groups=["g-nlp"], teams=TEAMS, current_idp_team_ids=[1, 2], admin_groups=[]
    )
    assert plan.roles == {2: core.ROLE_MEMBER}
    assert plan.remove_team_ids == frozenset({1})


def test_admin_group_grants_admin_and_absence_revokes_it() -> None:
    assert core.plan_memberships(
        groups=["ops-admins"], teams=TEAMS, current_idp_team_ids=[], admin_groups=["ops-admins"]
    ).is_admin
    assert not core.plan_memberships(
        groups=["g-nlp"], teams=TEAMS, current_idp_team_ids=[], admin_groups=["ops-admins"]
    ).is_admin


def test_empty_group_names_never_match_teams_without_groups() -> None:
    teams = [core.TeamGroups(team_id=3, member_group="", lead_group="")]
    plan = core.plan_memberships(
        groups=[""], teams=teams, current_idp_team_ids=[], admin_groups=[""]
    )
    assert plan.roles == {}
    assert plan.is_admin is False


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"groups": ["a", "b"]}, ["a", "b"]),
        ({"groups": "a, b"}, ["a", "b"]),
        ({"groups": None}, []),
        ({}, []),
        ({"groups": {"a": 1}}, []),
    ],
)
def test_groups_from_claims_accepts_the_shapes_providers_send(claims: dict, expected: list) -> None:
    assert core.groups_from_claims(claims, "groups") == expected


@pytest.mark.parametrize(
    "value",
    [
        "//evil.example",
        "/\\evil.example",
        "/\\/evil.example",
        "https://evil.example/",
        "https://testserver//evil.example",
        "http:/evil.example",
        "javascript:alert(1)",
        "/%2F%2Fevil.example",
        "/%5Cevil.example",
        "/\tevil",
        " /x",
        "evil.example",
        "",
        None,
    ],
)
def test_safe_next_path_refuses_off_site_targets(value: str | None) -> None:
    assert core.safe_next_path(value) is None


@pytest.mark.parametrize("value", ["/", "/workloads/3/", "/accounts/tokens/?tab=1#x"])
def test_safe_next_path_keeps_same_site_paths(value: str) -> None:
    assert core.safe_next_path(value) == value


def test_token_material_is_prefixed_and_only_the_digest_identifies_it() -> None:
    material = core.token_generate()
    assert material.plaintext.startswith(f"gpp_{material.lookup}_")
    assert material.digest == core.token_digest(material.plaintext)
    assert material.plaintext not in material.digest
    assert core.token_generate().plaintext != material.plaintext


@pytest.mark.parametrize(
    ("scopes", "write", "allowed"),
    [
        (["read"], False, True),
        (["read"], True, False),
        (["write"], True, True),
        (["write"], False, True),
        ([], False, False),
    ],
)
def test_token_scopes(scopes: list[str], write: bool, allowed: bool) -> None:
    assert core.token_allows(scopes, write=write) is allowed


GOOD = {"iss": "https://idp", "aud": "portal", "sub": "u1", "exp": 2000, "iat": 1000}


def test_id_token_claims_accepted_when_all_match() -> None:
    core.check_id_token_claims(GOOD, issuer="https://idp", client_id="portal", now=1500)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"iss": "https://other"}, "issued by"),
        ({"aud": "someone-else"}, "audience"),
        ({"aud": ["portal", "x"]}, "several audiences"),
        ({"exp": 1400}, "expired"),
        ({"iat": 1700}, "future"),
        ({"sub": ""}, "subject"),
    ],
)
def test_id_token_claims_refused(override: dict, message: str) -> None:
    with pytest.raises(core.ClaimsError, match=message):
        core.check_id_token_claims(
            {**GOOD, **override}, issuer="https://idp", client_id="portal", now=1500, leeway=60
        )
