from __future__ import annotations

from typing import Any

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
        ({"groups": "/ml/vision"}, ["/ml/vision"]),
        # A string is one group, never split: LDAP-style names contain commas.
        ({"groups": "CN=ml,OU=groups"}, ["CN=ml,OU=groups"]),
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


# --- groups as paths or names -------------------------------------------------------------------

FORMAT_TEAMS = [
    core.TeamGroups(team_id=1, member_group="/ml/vision", lead_group="/ml/vision/leads"),
    core.TeamGroups(team_id=2, member_group="nlp"),
]


def _plan(groups: list[str], fmt: str, admin: tuple[str, ...] = ("platform-admins",)) -> Any:
    return core.plan_memberships(
        groups=groups,
        teams=FORMAT_TEAMS,
        current_idp_team_ids=[],
        admin_groups=admin,
        groups_format=fmt,
    )


@pytest.mark.parametrize(
    ("value", "fmt", "configured", "key"),
    [
        ("/ml/vision", "auto", False, "/ml/vision"),
        ("/ml/vision/", "auto", True, "/ml/vision"),
        ("vision", "auto", False, "vision"),
        ("/ml/vision", "path", False, "/ml/vision"),
        ("gpupaas-admins", "path", True, "/gpupaas-admins"),
        ("ml/vision", "path", True, "/ml/vision"),
        ("vision", "path", False, None),  # a name in a claim of paths: place unknown
        ("vision", "name", False, "vision"),
        ("/ml/vision", "name", True, None),  # a configured path cannot match short names
        ("/ml/vision", "name", False, None),
        ("  ", "auto", False, None),
        ("/", "path", True, None),
    ],
)
def test_group_key_per_format(value: str, fmt: str, configured: bool, key: str | None) -> None:
    assert core.group_key(value, groups_format=fmt, configured=configured) == key


@pytest.mark.parametrize("fmt", ["auto", "path"])
def test_full_path_matches_only_the_same_path(fmt: str) -> None:
    assert _plan(["/ml/vision"], fmt).roles == {1: core.ROLE_MEMBER}
    assert _plan(["/other/ml/vision"], fmt).roles == {}
    assert _plan(["/ml/vision/leads"], fmt).roles == {1: core.ROLE_LEAD}


@pytest.mark.parametrize("fmt", ["auto", "path", "name"])
def test_a_short_name_never_matches_the_last_segment_of_a_path(fmt: str) -> None:
    plan = _plan(["/contractors/platform-admins", "/contractors/nlp"], fmt)
    assert plan.is_admin is False
    assert plan.roles == {}


def test_in_path_format_a_configured_name_is_a_top_level_group() -> None:
    assert _plan(["/platform-admins", "/nlp"], "path").is_admin is True
    assert _plan(["/platform-admins", "/nlp"], "path").roles == {2: core.ROLE_MEMBER}
    # In auto, written as a name it matches the name and the top-level path (Keycloak's
    # default), never a nested path.
    assert _plan(["/platform-admins"], "auto").is_admin is True
    assert _plan(["platform-admins"], "auto").is_admin is True
    assert _plan(["/contractors/platform-admins"], "auto").is_admin is False


def test_in_path_format_short_names_in_the_claim_are_ignored_and_reported() -> None:
    plan = _plan(["platform-admins", "nlp"], "path")
    assert plan.is_admin is False
    assert plan.roles == {}
    assert plan.ignored_groups == ("platform-admins", "nlp")


def test_in_name_format_configured_paths_are_reported_as_unmatchable() -> None:
    plan = _plan(["vision", "nlp"], "name", admin=("/platform-admins",))
    assert plan.roles == {2: core.ROLE_MEMBER}
    assert set(plan.unmatchable_groups) == {"/ml/vision", "/ml/vision/leads", "/platform-admins"}


def test_unknown_groups_format_is_refused() -> None:
    with pytest.raises(ValueError, match="format"):
        _plan([], "suffix")


@pytest.mark.parametrize(
    ("claims", "shape", "groups", "described"),
    [
        ({"groups": ["/a", "/b"]}, "list", ("/a", "/b"), "a list of 2: full paths"),
        ({"groups": ["a", "b"]}, "list", ("a", "b"), "a list of 2: short names"),
        ({"groups": ["/a", "b"]}, "list", ("/a", "b"), "mixed"),
        ({"groups": []}, "list", (), "a list of 0: no groups"),
        ({"groups": "/ml/vision"}, "string", ("/ml/vision",), "a string of 1: full paths"),
        ({}, "absent", (), "absent"),
        ({"groups": None}, "absent", (), "absent"),
        ({"groups": 7}, "unusable", (), "unusable"),
    ],
)
def test_groups_claim_shape_is_described_for_the_log(
    claims: dict, shape: str, groups: tuple, described: str
) -> None:
    claim = core.read_groups_claim(claims, "groups")
    assert (claim.shape, claim.groups) == (shape, groups)
    assert described in claim.describe()


# --- nbf, azp ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"nbf": 1700}, "not valid yet"),
        ({"azp": "someone-else"}, "azp"),
        ({"aud": ["portal", "x"], "azp": "x"}, "azp"),
    ],
)
def test_id_token_nbf_and_azp_refused(override: dict, message: str) -> None:
    with pytest.raises(core.ClaimsError, match=message):
        core.check_id_token_claims(
            {**GOOD, **override}, issuer="https://idp", client_id="portal", now=1500, leeway=60
        )


@pytest.mark.parametrize(
    "override",
    [{"nbf": 1550}, {"nbf": 1000}, {"azp": "portal"}, {"aud": ["portal", "x"], "azp": "portal"}],
)
def test_id_token_nbf_within_leeway_and_our_azp_accepted(override: dict) -> None:
    core.check_id_token_claims(
        {**GOOD, **override}, issuer="https://idp", client_id="portal", now=1500, leeway=60
    )


# --- logout tokens -------------------------------------------------------------------------------

LOGOUT = {
    "iss": "https://idp",
    "aud": "portal",
    "iat": 1000,
    "exp": 1120,
    "jti": "j1",
    "sub": "u1",
    "sid": "s1",
    "events": {core.BACKCHANNEL_LOGOUT_EVENT: {}},
}


def test_logout_token_accepted_names_subject_and_session() -> None:
    logout = core.check_logout_token_claims(
        LOGOUT, issuer="https://idp", client_id="portal", now=1010
    )
    assert (logout.subject, logout.sid, logout.jti) == ("u1", "s1", "j1")


@pytest.mark.parametrize(
    ("override", "drop", "message"),
    [
        ({"iss": "https://other"}, (), "issued by"),
        ({"aud": "other"}, (), "audience"),
        ({}, ("iat",), "iat"),
        ({"iat": 2000}, (), "future"),
        ({"exp": 900}, (), "expired"),
        ({}, ("events",), "not a logout token"),
        ({"events": {"http://example/other": {}}}, (), "not a logout token"),
        ({"events": {core.BACKCHANNEL_LOGOUT_EVENT: "yes"}}, (), "not a logout token"),
        ({"nonce": "n"}, (), "nonce"),
        ({}, ("sub", "sid"), "neither"),
        ({}, ("jti",), "jti"),
    ],
)
def test_logout_token_refused(override: dict, drop: tuple[str, ...], message: str) -> None:
    payload = {k: v for k, v in {**LOGOUT, **override}.items() if k not in drop}
    with pytest.raises(core.ClaimsError, match=message):
        core.check_logout_token_claims(payload, issuer="https://idp", client_id="portal", now=1010)


def test_group_recheck_is_due_after_the_interval_and_lapses_after_twice() -> None:
    assert not core.groups_recheck_due(checked_at=None, now=10_000, max_age=3600)
    assert not core.groups_recheck_due(checked_at=7000, now=10_000, max_age=3600)
    assert core.groups_recheck_due(checked_at=6400, now=10_000, max_age=3600)
    assert not core.groups_lapse_due(checked_at=6400, now=10_000, max_age=3600)
    assert core.groups_lapse_due(checked_at=2800, now=10_000, max_age=3600)
