"""The API list's statements (WorkloadListing) against the ORM reference (workloads_filtered):
the same rows, in the same order, with the same count, for every filter and every member of
the cast; and plans that stay index walks when PostgreSQL reuses a prepared statement."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.selectors import active_token_by_plaintext, team_ids_of
from apps.accounts.services import api_token_create
from apps.api.serializers import ROW_VALUES
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import SORTS, WorkloadFilters, WorkloadListing, workloads_filtered
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    MembershipFactory,
    TeamFactory,
    WorkloadFactory,
)
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


@pytest.fixture
def mixed(cast: Cast) -> Cast:
    """Workloads of both teams in several states, kinds, owners and classes; one deleted."""
    other_class = GpuClassFactory(name="L40S")
    now = timezone.now()
    specs: list[dict[str, Any]] = [
        {"name": "train_50%", "state": core.RUNNING},
        {"name": "Train-big", "state": core.QUEUED, "owner": cast.teammate},
        {"name": "explore", "kind": core.KIND_NOTEBOOK, "state": core.PENDING,
         "priority_class": core.PRIORITY_DEVELOPMENT},
        {"name": "sweep-lr", "kind": core.KIND_SWEEP, "state": core.SUCCEEDED,
         "gpu_class": other_class, "owner": cast.lead},
        {"name": "trainXbig", "state": core.FAILED, "owner": cast.teammate},
        {"name": "gone", "state": core.CANCELLED, "deleted_at": now},
        {"name": "theirs", "team": cast.other_team, "owner": cast.outsider},
        {"name": "theirs-nb", "team": cast.other_team, "owner": cast.outsider,
         "kind": core.KIND_NOTEBOOK, "state": core.RUNNING},
        {"name": "bert-ft", "state": core.SUCCEEDED, "owner": cast.teammate,
         "image": ImageFactory(name="HF transformers",
                               reference="ghcr.io/huggingface/transformers:4.46"),
         "command": ["accelerate", "launch", "finetune.py"], "args": ["--lr", "3e-5"]},
    ]  # fmt: skip
    for i, spec in enumerate(specs):
        values: dict[str, Any] = {
            "team": cast.team,
            "owner": cast.owner,
            "gpu_class": cast.gpu_class,
            "image": cast.image,
            "created_at": now - timedelta(minutes=i),
            **spec,
        }
        WorkloadFactory(**values)
    # Two rows created at the same instant: the id breaks the tie, in both paths.
    for name in ("tie-a", "tie-b"):
        WorkloadFactory(
            name=name, team=cast.team, owner=cast.owner, gpu_class=cast.gpu_class,
            image=cast.image, created_at=now - timedelta(hours=1),
        )  # fmt: skip
    MembershipFactory(user=cast.lead, team=cast.other_team)  # the lead is in both teams
    return cast


FILTERS = [
    WorkloadFilters(),
    WorkloadFilters(states=(core.RUNNING,)),
    WorkloadFilters(states=(core.RUNNING, core.QUEUED, core.PENDING)),
    WorkloadFilters(kinds=(core.KIND_NOTEBOOK, core.KIND_SWEEP)),
    WorkloadFilters(team="vision"),
    WorkloadFilters(team="nlp"),
    WorkloadFilters(team="no-such-team"),
    WorkloadFilters(owner="me"),
    WorkloadFilters(owner="teammate"),
    WorkloadFilters(owner="nobody"),
    WorkloadFilters(gpu_class="L40S"),
    WorkloadFilters(gpu_class="no-such-class"),
    WorkloadFilters(priority_class=core.PRIORITY_DEVELOPMENT),
    WorkloadFilters(search="train"),
    WorkloadFilters(search="_50%"),  # LIKE's wildcards are literal text here
    WorkloadFilters(search="n_"),
    WorkloadFilters(search="TRAIN", states=(core.QUEUED, core.FAILED), owner="teammate"),
    WorkloadFilters(search="huggingface"),  # the image's reference
    WorkloadFilters(search="hf TRANS"),  # the image's name
    WorkloadFilters(search="finetune"),  # the command
    WorkloadFilters(search="3e-5"),  # the arguments
    WorkloadFilters(search="nvcr.io", kinds=(core.KIND_TRAINING,), sort="name"),
    WorkloadFilters(created_before=datetime(2000, 1, 1, tzinfo=UTC)),
    WorkloadFilters(created_from=datetime(2000, 1, 1, tzinfo=UTC), sort="-name"),
    *(WorkloadFilters(sort=key) for key in SORTS),
    WorkloadFilters(states=(core.RUNNING, core.FAILED, core.QUEUED), sort="state"),
]
WHO = ["owner", "teammate", "lead", "outsider", "admin"]


def reference(user: User, filters: WorkloadFilters) -> list[dict[str, Any]]:
    return list(workloads_filtered(user, filters).values(*ROW_VALUES))


@pytest.mark.parametrize("filters", FILTERS, ids=repr)
@pytest.mark.parametrize("who", WHO)
def test_listing_matches_the_orm_for_every_filter_and_caller(
    mixed: Cast, who: str, filters: WorkloadFilters
) -> None:
    user = getattr(mixed, who)
    expected = reference(user, filters)
    listing = WorkloadListing(user, filters, ROW_VALUES)
    assert listing.count() == len(expected)
    assert listing.rows(offset=0, limit=100) == expected


def test_date_range_takes_what_was_created_in_it(mixed: Cast) -> None:
    newest = Workload.objects.filter(team=mixed.team).order_by("-created_at").first()
    assert newest is not None
    start, end = newest.created_at - timedelta(minutes=4, seconds=30), newest.created_at
    filters = WorkloadFilters(created_from=start, created_before=end)
    names = [r["name"] for r in WorkloadListing(mixed.admin, filters, ROW_VALUES)[:50]]
    assert names == [r["name"] for r in reference(mixed.admin, filters)]
    # Minutes 1 … 4 before the newest (the newest itself is not before ``end``).
    assert names == ["Train-big", "explore", "sweep-lr", "trainXbig"]


@pytest.mark.parametrize("sort", list(SORTS))
def test_every_sort_pages_the_same_on_both_paths(mixed: Cast, sort: str) -> None:
    filters = WorkloadFilters(sort=sort)
    expected = reference(mixed.admin, filters)
    listing = WorkloadListing(mixed.admin, filters, ROW_VALUES)
    pages = [listing[i : i + 3] for i in range(0, len(expected) + 3, 3)]
    assert [row for page in pages for row in page] == expected


def test_listing_pages_are_slices_of_the_orm_order(mixed: Cast) -> None:
    expected = reference(mixed.owner, WorkloadFilters())
    listing = WorkloadListing(mixed.owner, WorkloadFilters(), ROW_VALUES)
    pages = [listing[i : i + 2] for i in range(0, len(expected) + 2, 2)]
    assert [row for page in pages for row in page] == expected
    assert listing[len(expected) : len(expected) + 5] == []
    assert [row["name"] for row in expected[-2:]] == ["tie-b", "tie-a"]


def test_listing_hides_deleted_workloads_and_other_teams(mixed: Cast) -> None:
    names = {r["name"] for r in WorkloadListing(mixed.owner, WorkloadFilters(), ROW_VALUES)[:50]}
    assert "gone" not in names
    assert not names & {"theirs", "theirs-nb"}
    assert {"theirs", "theirs-nb"} <= {
        r["name"] for r in WorkloadListing(mixed.admin, WorkloadFilters(), ROW_VALUES)[:50]
    }


def test_user_without_a_team_sees_nothing_and_no_statement_runs(
    mixed: Cast, django_assert_num_queries: Any
) -> None:
    loner = User.objects.create(username="loner")
    listing = WorkloadListing(loner, WorkloadFilters(), ROW_VALUES)
    with django_assert_num_queries(2):  # the platform roles and the team ids; then nothing
        assert listing.count() == 0
        assert listing.rows(offset=0, limit=50) == []


def test_json_and_datetime_values_come_back_as_the_orm_gives_them(cast: Cast) -> None:
    WorkloadFactory(
        team=cast.team, owner=cast.owner, gpu_class=cast.gpu_class, image=cast.image,
        command=["python", "-c", "print('ü')"], env={"A": "1", "B": ""},
        params={"grid": {"lr": ["0.1"]}}, queue_position=3,
        estimated_start_at=timezone.now() + timedelta(minutes=5),
    )  # fmt: skip
    [row] = WorkloadListing(cast.owner, WorkloadFilters(), ROW_VALUES)[:1]
    [expected] = reference(cast.owner, WorkloadFilters())
    assert row == expected
    assert row["env"] == {"A": "1", "B": ""}
    assert row["estimated_start_at"].tzinfo is not None


@pytest.mark.parametrize("who", ["owner", "admin"])
def test_the_count_brings_the_expected_page_in_the_same_statement(
    mixed: Cast, who: str, django_assert_num_queries: Any
) -> None:
    user = getattr(mixed, who)
    expected = reference(user, WorkloadFilters())
    listing = WorkloadListing(user, WorkloadFilters(), ROW_VALUES)
    listing.expect(offset=2, limit=3)
    user._team_ids = team_ids_of(user)  # as the token lookup leaves them (tested below)
    with django_assert_num_queries(1):
        assert listing.count() == len(expected)
        assert listing[2:5] == expected[2:5]
    assert listing[0:2] == expected[0:2]  # another page: a statement of its own


def test_an_expected_page_past_the_end_still_counts_right(mixed: Cast) -> None:
    total = len(reference(mixed.owner, WorkloadFilters()))
    listing = WorkloadListing(mixed.owner, WorkloadFilters(), ROW_VALUES)
    listing.expect(offset=total + 10, limit=5)
    assert listing.count() == total
    assert listing[total + 10 : total + 15] == []


def test_an_expected_first_page_of_nothing_counts_zero(mixed: Cast) -> None:
    listing = WorkloadListing(mixed.owner, WorkloadFilters(search="no such name"), ROW_VALUES)
    listing.expect(offset=0, limit=50)
    assert listing.count() == 0
    assert listing[0:50] == []


# --- plans ------------------------------------------------------------------------------------


def _plan(sql: str, params: list[Any], *, generic: bool) -> str:
    """EXPLAIN of the statement as PostgreSQL runs it prepared, generic or custom plan."""
    numbers = iter(range(1, len(params) + 1))
    numbered = re.sub(r"%s", lambda _m: f"${next(numbers)}", sql)
    types = ", ".join("text" if isinstance(p, str) else "bigint" for p in params)
    literals = ", ".join(
        "'" + p.replace("'", "''") + "'" if isinstance(p, str) else str(int(p)) for p in params
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SET LOCAL plan_cache_mode = "
            + ("force_generic_plan" if generic else "force_custom_plan")
        )
        cursor.execute(f"PREPARE listing_plan ({types}) AS {numbered}")
        try:
            cursor.execute(f"EXPLAIN EXECUTE listing_plan ({literals})")
            return "\n".join(r[0] for r in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE listing_plan")


@pytest.fixture
def thousands(cast: Cast) -> Cast:
    """3,000 workloads over ten teams, 300 of them the owner's team's: the shape of a real
    installation, so the planner's estimates are those it makes there."""
    teams = [cast.team, *(TeamFactory(name=f"Team {i}") for i in range(9))]
    now = timezone.now()
    Workload.objects.bulk_create(
        [
            Workload(
                name=f"job-{i}", kind=core.KIND_TRAINING, state=core.SUCCEEDED,
                team=teams[i % len(teams)], owner=cast.owner, gpu_class=cast.gpu_class,
                image=cast.image, gpu_milli=1000, charged_milli=1000, replicas=1,
                priority_class=core.PRIORITY_TRAINING, created_at=now - timedelta(seconds=i),
            )
            for i in range(3000)
        ]
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Workload._meta.db_table}")
    return cast


@pytest.mark.parametrize("generic", [False, True], ids=["custom plan", "generic plan"])
def test_a_page_walks_the_team_index_and_fetches_rows_by_key(
    thousands: Cast, generic: bool
) -> None:
    listing = WorkloadListing(thousands.owner, WorkloadFilters(), ROW_VALUES)
    query = listing.rows_query(offset=200, limit=50)
    assert query is not None
    plan = _plan(*query, generic=generic)
    # The page's ids from an index walked in page order (which one is the planner's choice
    # for the data at hand), then only those rows, by primary key: never a pass over the
    # whole table, which is what a generic plan of ``id IN (subquery)`` did.
    assert "Seq Scan on workloads_workload" not in plan, plan
    assert "Index Scan using workloads_workload_pkey on workloads_workload w " in plan, plan
    assert "Index Cond: (id = ANY ($0))" in plan, plan


def test_the_count_walks_only_the_teams_part_of_the_index(thousands: Cast) -> None:
    query = WorkloadListing(thousands.owner, WorkloadFilters(), ROW_VALUES).count_query()
    assert query is not None
    plan = _plan(*query, generic=True)
    # Only the team's entries of an index on team_id (the live-workload one once the table is
    # vacuumed; a transaction in a test never is), never a pass over every team's rows.
    assert "Index Cond: (team_id = $1)" in plan, plan
    assert "Seq Scan on workloads_workload" not in plan, plan


def test_the_lists_filter_implies_the_listed_indexes_condition(thousands: Cast) -> None:
    """The page and the count can be read from the index alone only if every row they filter
    for is in it: the partial index's condition must be implied by the list's filter (a
    condition the list does not state, or one it states beyond the index's, sends PostgreSQL
    to the table for every entry)."""
    query = WorkloadListing(thousands.owner, WorkloadFilters(), ROW_VALUES).count_query()
    assert query is not None
    sql = query[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes "
            "WHERE tablename = %s AND indexname = ANY(%s)",
            [Workload._meta.db_table, ["workload_listed_team_idx", "workload_listed_idx"]],
        )
        indexes = dict(cursor.fetchall())
    assert set(indexes) == {"workload_listed_team_idx", "workload_listed_idx"}
    for definition in indexes.values():
        assert "WHERE ((deleted_at IS NULL) AND (sweep_id IS NULL))" in definition, definition
    assert "deleted_at IS NULL" in sql and "sweep_id IS NULL" in sql, sql


# --- the token lookup that feeds it ---------------------------------------------------------


def test_token_lookup_brings_the_users_team_ids(mixed: Cast) -> None:
    _, plaintext = api_token_create(actor=mixed.lead, name="ci", scopes=["read"], expires_at=None)
    token = active_token_by_plaintext(plaintext)
    assert token is not None
    assert token.user == mixed.lead
    assert token.scopes == ["read"]
    assert team_ids_of(token.user) == sorted([mixed.team.pk, mixed.other_team.pk])
    assert team_ids_of(mixed.lead) == team_ids_of(token.user)  # read from the database


def test_other_databases_take_the_orm_path_with_the_same_answers(
    mixed: Cast, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite (the zero-setup run command) pages and authenticates through the ORM."""
    _, plaintext = api_token_create(actor=mixed.owner, name="cli", scopes=["read"], expires_at=None)
    expected = reference(mixed.owner, WorkloadFilters(kinds=(core.KIND_TRAINING,)))
    monkeypatch.setattr(connections["default"], "vendor", "sqlite")
    token = active_token_by_plaintext(plaintext)
    assert token is not None and token.user == mixed.owner
    assert not hasattr(token.user, "_team_ids")
    listing = WorkloadListing(token.user, WorkloadFilters(kinds=(core.KIND_TRAINING,)), ROW_VALUES)
    listing.expect(offset=1, limit=2)
    assert listing.count() == len(expected)
    assert listing[1:3] == expected[1:3]
