"""The workload lists: the API's and the portal's filters, sorting and pages, read in one
query."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, cached_property
from typing import Any, cast

import orjson
from django.db import connection, models
from django.db.models import Q, QuerySet

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, team_ids_of
from apps.catalog.models import GpuClass, Image
from apps.workloads.models import Workload
from apps.workloads.selectors.visibility import workloads_visible_to


@dataclass(frozen=True)
class WorkloadFilters:
    """Filters of the workload list; all optional, and they combine."""

    states: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    team: str | None = None  # a team's slug
    owner: str | None = None  # a username, or "me"
    gpu_class: str | None = None  # a GPU class name
    priority_class: str | None = None
    # Part of the name, the image (its name or reference), the command or the arguments, in
    # any case.
    search: str | None = None
    created_from: datetime | None = None  # created at or after
    created_before: datetime | None = None  # created before
    sort: str = "-created"  # a key of SORTS


# The orders the list offers: (ORM order, SQL order on ``w``); every one ends in the id, so a
# page boundary is the same on both paths and never splits ties differently.
SORTS: dict[str, tuple[tuple[str, ...], str]] = {
    "-created": (("-created_at", "-id"), "w.created_at DESC, w.id DESC"),
    "created": (("created_at", "id"), "w.created_at ASC, w.id ASC"),
    "name": (("name", "id"), "w.name ASC, w.id ASC"),
    "-name": (("-name", "-id"), "w.name DESC, w.id DESC"),
    "state": (("state", "-created_at", "-id"), "w.state ASC, w.created_at DESC, w.id DESC"),
    "kind": (("kind", "-created_at", "-id"), "w.kind ASC, w.created_at DESC, w.id DESC"),
}
SORT_LABELS = {
    "-created": "Newest first",
    "created": "Oldest first",
    "name": "Name A–Z",
    "-name": "Name Z–A",
    "state": "State",
    "kind": "Kind",
}


def day_start(day: date | None, *, days_after: int = 0) -> datetime | None:
    """Midnight UTC starting ``day`` (plus ``days_after`` days): a date filter's bound."""
    if day is None:
        return None
    return datetime.combine(day + timedelta(days=days_after), time.min, tzinfo=UTC)


def workloads_filtered(user: User, filters: WorkloadFilters) -> QuerySet[Workload]:
    """The workloads ``user`` may see that match ``filters``, in the order asked for."""
    qs = workloads_visible_to(user).filter(sweep__isnull=True)  # trials: on the sweep's page
    if filters.states:
        qs = qs.filter(state__in=filters.states)
    if filters.kinds:
        qs = qs.filter(kind__in=filters.kinds)
    if filters.team is not None:
        qs = qs.filter(team__slug=filters.team)
    if filters.owner is not None:
        if filters.owner == "me":
            qs = qs.filter(owner=user)
        else:
            qs = qs.filter(owner__username=filters.owner)
    if filters.gpu_class is not None:
        qs = qs.filter(gpu_class__name=filters.gpu_class)
    if filters.priority_class is not None:
        qs = qs.filter(priority_class=filters.priority_class)
    if filters.search is not None:
        text = filters.search
        qs = qs.filter(
            Q(name__icontains=text)
            | Q(image_id__in=Image.objects.filter(
                Q(name__icontains=text) | Q(reference__icontains=text)
            ).values("id"))
            | Q(command__icontains=text)
            | Q(args__icontains=text)
        )  # fmt: skip
    if filters.created_from is not None:
        qs = qs.filter(created_at__gte=filters.created_from)
    if filters.created_before is not None:
        qs = qs.filter(created_at__lt=filters.created_before)
    return qs.order_by(*SORTS[filters.sort][0])


class WorkloadListing:
    """One page of :func:`workloads_filtered` as plain values, and the count of all of them.

    This is the API's hottest read (CLI polling, dashboards, CI pipelines), so on PostgreSQL
    it is fixed SQL (the page's rows with the names of their team, owner, class and image,
    and the count of all of them, in one statement when the page is known beforehand) that
    psycopg prepares once per connection, instead of ORM querysets compiled on every
    request: the ORM's compiling and converting cost more than PostgreSQL's work here. The
    conditions are those of :func:`workloads_filtered`, which stays the reference (and the
    path on other databases); a test holds both to the same answers for every filter.

    The SQL is assembled from model metadata (table and column names) and fixed text; every
    value from the request is a parameter (hence the S608 waivers below).
    """

    def __init__(self, user: User, filters: WorkloadFilters, columns: Sequence[str]) -> None:
        self.user = user
        self.filters = filters
        self.columns = tuple(columns)
        self._expected: tuple[int, int] | None = None
        self._prefetched: tuple[int, int, list[dict[str, Any]]] | None = None

    def expect(self, *, offset: int, limit: int) -> None:
        """Say which page will be asked for after the count: the count then brings that page
        along in the same statement (one round trip to PostgreSQL instead of two)."""
        self._expected = (offset, limit)

    # Sized and sliceable like a queryset, so Django's Paginator (and DRF's) can page it.
    def __getitem__(self, page: slice) -> list[dict[str, Any]]:
        start, stop = page.start or 0, page.stop
        assert stop is not None and page.step is None, "only pages: listing[a:b]"
        return self.rows(offset=start, limit=max(0, stop - start))

    def count(self) -> int:
        if connection.vendor != "postgresql":
            return workloads_filtered(self.user, self.filters).count()
        if self._expected is not None:
            offset, limit = self._expected
            query = self.rows_query(offset=offset, limit=limit, with_total=True)
            if query is None:
                return 0
            fetched = self._execute(query)
            if fetched or offset == 0:
                self._prefetched = (offset, limit, self._as_rows(row[1:] for row in fetched))
                return int(fetched[0][0]) if fetched else 0
            # An empty page past the first: how many there are takes a count of its own.
        query = self.count_query()
        if query is None:
            return 0
        [(total,)] = self._execute(query)
        return int(total)

    def rows(self, *, offset: int, limit: int) -> list[dict[str, Any]]:
        """Rows ``offset`` … ``offset + limit`` as dicts keyed by ``columns``."""
        if connection.vendor != "postgresql":
            page = workloads_filtered(self.user, self.filters)[offset : offset + limit]
            return list(page.values(*self.columns))
        if self._prefetched is not None:
            # The paginator cuts the last page at the count: a shorter slice of the same rows.
            start, size, rows = self._prefetched
            if offset == start and limit <= size:
                return rows[:limit]
        query = self.rows_query(offset=offset, limit=limit)
        if query is None:
            return []
        return self._as_rows(self._execute(query))

    @staticmethod
    def _execute(query: tuple[str, list[Any]]) -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute(*query)
            return cursor.fetchall()

    def _as_rows(self, fetched: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
        """Dicts keyed by ``columns``, JSON columns decoded (the driver hands them as text)."""
        json_columns = _select_sql(self.columns)[2]
        rows = [dict(zip(self.columns, values, strict=True)) for values in fetched]
        for row in rows:
            for name in json_columns:
                if isinstance(row[name], str):
                    row[name] = orjson.loads(row[name])
        return rows

    # --- the statements (PostgreSQL) ---

    def count_query(self) -> tuple[str, list[Any]] | None:
        """The count's SQL and parameters; None when nothing can match."""
        where = self._conditions
        if where is None:
            return None
        sql, params = where
        return f"SELECT COUNT(*) FROM {_W} w WHERE {sql}", params  # noqa: S608

    def rows_query(
        self, *, offset: int, limit: int, with_total: bool = False
    ) -> tuple[str, list[Any]] | None:
        """The page's SQL and parameters; None when nothing can match. ``with_total`` adds the
        count of all matching rows as the first column (an InitPlan, computed once)."""
        where = self._conditions
        if where is None:
            return None
        sql, params = where
        select, joins, _ = _select_sql(self.columns)
        order = SORTS[self.filters.sort][1]
        if with_total:
            select = f"(SELECT COUNT(*) FROM {_W} w WHERE {sql}), {select}"  # noqa: S608
            params = [*params, *params]
        # The page's ids come from the index alone (an InitPlan); only those rows are read
        # and joined. Phrased as ``= ANY(ARRAY(…))`` rather than ``IN (subquery)`` so that
        # the generic plan PostgreSQL settles on for the prepared statement still fetches the
        # rows by primary key instead of hashing the whole table.
        query = (
            f"SELECT {select} FROM {_W} w {joins} WHERE w.id = ANY(ARRAY("  # noqa: S608
            f"SELECT w.id FROM {_W} w WHERE {sql} "
            f"ORDER BY {order} LIMIT %s OFFSET %s"
            f")) ORDER BY {order}"
        )
        return query, [*params, limit, offset]

    @cached_property
    def _conditions(self) -> tuple[str, list[Any]] | None:
        """The WHERE clause on ``w`` and its parameters; None when nothing can match."""
        f, user = self.filters, self.user
        conditions = ["w.deleted_at IS NULL", "w.sweep_id IS NULL"]
        params: list[Any] = []
        if not platform_may(user, Act.SEE_TEAMS):
            # Literal team ids: with one team, PostgreSQL walks that team's live-workload
            # index in page order, for the count and the page alike.
            ids = team_ids_of(user)
            if not ids:
                return None
            conditions.append(f"w.team_id IN ({', '.join(['%s'] * len(ids))})")
            params.extend(ids)
        if f.team is not None:
            conditions.append(f"w.team_id = (SELECT id FROM {_TEAM} WHERE slug = %s)")  # noqa: S608
            params.append(f.team)
        for column, values in (("state", f.states), ("kind", f.kinds)):
            if values:
                conditions.append(f"w.{column} IN ({', '.join(['%s'] * len(values))})")
                params.extend(values)
        if f.owner == "me":
            conditions.append("w.owner_id = %s")
            params.append(user.pk)
        elif f.owner is not None:
            conditions.append(f"w.owner_id = (SELECT id FROM {_USER} WHERE username = %s)")  # noqa: S608
            params.append(f.owner)
        if f.gpu_class is not None:
            conditions.append(f"w.gpu_class_id = (SELECT id FROM {_GPU_CLASS} WHERE name = %s)")  # noqa: S608
            params.append(f.gpu_class)
        if f.priority_class is not None:
            conditions.append("w.priority_class = %s")
            params.append(f.priority_class)
        if f.search is not None:
            # As Django's icontains on PostgreSQL: LIKE's wildcards in the text are escaped.
            like = f"%{connection.ops.prep_for_like_query(f.search)}%"
            images = f"SELECT id FROM {_IMAGE} WHERE UPPER(name::text) LIKE UPPER(%s)"  # noqa: S608
            conditions.append(
                f"(UPPER(w.name::text) LIKE UPPER(%s) OR w.image_id IN ({images}"
                " OR UPPER(reference::text) LIKE UPPER(%s))"
                " OR UPPER(w.command::text) LIKE UPPER(%s) OR UPPER(w.args::text) LIKE UPPER(%s))"
            )
            params.extend([like] * 5)
        if f.created_from is not None:
            conditions.append("w.created_at >= %s")
            params.append(f.created_from)
        if f.created_before is not None:
            conditions.append("w.created_at < %s")
            params.append(f.created_before)
        return " AND ".join(conditions), params


_W = Workload._meta.db_table
_TEAM = Team._meta.db_table
_USER = User._meta.db_table
_GPU_CLASS = GpuClass._meta.db_table
_IMAGE = Image._meta.db_table


@cache
def _select_sql(columns: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    """SELECT list, joins and JSON columns for ``values()``-style names on workloads ``w``:
    own fields, or one field of a related row (``team__slug``)."""
    select: list[str] = []
    joins: dict[str, str] = {}
    json_columns: list[str] = []
    for name in columns:
        relation, _, attname = name.partition("__")
        field = Workload._meta.get_field(relation)
        if attname:
            assert isinstance(field, models.ForeignKey), name
            target = cast("type[models.Model]", field.related_model)._meta
            target_field = target.get_field(attname)
            assert isinstance(target_field, models.Field), name
            alias = f"r_{relation}"
            joins.setdefault(
                relation,
                f"JOIN {target.db_table} {alias} ON {alias}.{target.pk.column} = w.{field.column}",
            )
            select.append(f"{alias}.{target_field.column}")
        else:
            assert isinstance(field, models.Field), name
            select.append(f"w.{field.column}")
            if isinstance(field, models.JSONField):
                json_columns.append(name)
    return ", ".join(select), " ".join(joins.values()), tuple(json_columns)
