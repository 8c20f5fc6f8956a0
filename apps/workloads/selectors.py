from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache, cached_property
from typing import Any, cast

import orjson
from django.conf import settings
from django.db import connection, models
from django.db.models import Count, F, Q, QuerySet, Sum
from django.utils import timezone

from apps.accounts.models import Team, User
from apps.accounts.selectors import is_team_lead, team_ids_of
from apps.budgets.selectors import budget_state
from apps.catalog.models import ClusterNode, GpuClass, Image
from apps.catalog.selectors import gpu_classes_offered, ready_nodes, sharing_class_names
from apps.credentials.selectors import secrets_usable_by
from apps.datasets.selectors import team_datasets
from apps.policies.selectors import team_policy_spec
from apps.quotas.core import QuotaNumbers, format_milli, with_grants
from apps.quotas.models import TeamQuota
from apps.quotas.selectors import grant_specs
from apps.reservations.selectors import active_bookings, effective_quota
from apps.workloads import core, rules
from apps.workloads.models import RequestTemplate, Workload


def preemption_grace_seconds() -> dict[str, int]:
    """Grace period per priority class as configured: the one the scheduler waits for, the pod
    is given (terminationGracePeriodSeconds) and the preemption message names."""
    override = settings.SCHEDULING_PREEMPTION_GRACE_SECONDS
    return {p: core.grace_seconds_for(p, override) for p in core.PRIORITY_ORDER}


def workloads_visible_to(user: User) -> QuerySet[Workload]:
    """Workloads the user may see: their teams' (owner, teammates, leads); all for admins.

    Phrased as ``team_id IN (1, 2)`` with the ids read first, rather than a join or a
    subquery through memberships: with the literal list PostgreSQL walks the live-workload
    index of a team for a page (and its count) instead of reading and sorting every row.
    """
    qs = Workload.objects.select_related("owner", "team", "gpu_class", "image").filter(
        deleted_at__isnull=True
    )
    if user.is_staff:
        return qs
    return qs.filter(team_id__in=team_ids_of(user))


def workload_for_user(user: User, workload_id: int) -> Workload:
    """One workload the user may see; ``Workload.DoesNotExist`` (→ 404) for anyone else's."""
    return workloads_visible_to(user).get(pk=workload_id)


# --- the API's list -----------------------------------------------------------------------


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
        if not user.is_staff:
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


# --- what a request is checked against -------------------------------------------------------


def request_context(*, actor: User, team: Team, gpu_class: GpuClass, image: Image) -> rules.Context:
    """What the request rule set reads of the database for ``actor`` asking ``team``'s quota
    of ``gpu_class`` with ``image``: the role, the class's ready nodes, the quota, and what
    one replica asks for besides GPUs, the secrets the actor may use, the team's datasets, its
    policy and this month's budget. Eight small queries (a few more when the team has a
    policy)."""
    defaults = {f.name: f.get_default() for f in Workload._meta.fields}
    return rules.Context(
        team=team.name,
        leads=is_team_lead(actor, team.pk),
        gpu_class=gpu_class,
        image=image,
        nodes=tuple(ready_nodes(gpu_class)),
        quota=effective_quota(team, gpu_class, user=actor, now=timezone.now()),
        sharing_classes=tuple(sharing_class_names(besides=gpu_class)),
        cpu_milli=int(defaults["cpu_milli"]),
        memory_mib=int(defaults["memory_mib"]),
        actor_id=actor.pk,
        secrets=tuple(secrets_usable_by(actor, team)),
        reserved_env=(
            rules.DEFAULT_RESERVED_ENV
            if settings.ENV_RESERVED is None
            else rules.ReservedEnv.of(settings.ENV_RESERVED)
        ),
        datasets=tuple(team_datasets(team)),
        admin=actor.is_staff,
        policy=team_policy_spec(team),
        budget=budget_state(team),
    )


# --- portal reads -------------------------------------------------------------------------


def workload_may_manage(user: User, workload: Workload) -> bool:
    """Whether ``user`` may cancel, suspend, resume or delete it: its owner, a lead of its team,
    an admin."""
    return workload.owner_id == user.pk or is_team_lead(user, workload.team_id)


def workload_may_open(user: User, workload: Workload) -> bool:
    """Only a notebook's owner and platform admins may open it (it is their home directory)."""
    return workload.kind == core.KIND_NOTEBOOK and (user.is_staff or workload.owner_id == user.pk)


def waiting_workloads_for_teams(teams: Iterable[Team]) -> QuerySet[Workload]:
    """The teams' workloads waiting for GPUs, in queue order (unknown positions last)."""
    return (
        Workload.objects.units()
        .select_related("owner", "team", "gpu_class")
        .filter(team__in=list(teams), state__in=core.WAITING_STATES | {core.PREEMPTED})
        .order_by(F("queue_position").asc(nulls_last=True), "created_at", "id")
    )


def team_workloads(
    team: Team,
    *,
    states: Iterable[str] | None = None,
    kind: str | None = None,
    owner: User | None = None,
    gpu_class: GpuClass | None = None,
) -> QuerySet[Workload]:
    qs = (
        Workload.objects.listed()
        .select_related("owner", "team", "gpu_class", "image")
        .filter(team=team, deleted_at__isnull=True)
    )
    if states is not None:
        qs = qs.filter(state__in=list(states))
    if kind:
        qs = qs.filter(kind=kind)
    if owner is not None:
        qs = qs.filter(owner=owner)
    if gpu_class is not None:
        qs = qs.filter(gpu_class=gpu_class)
    return qs


def request_templates_for(user: User, *, kind: str | None = None) -> QuerySet[RequestTemplate]:
    """The user's own templates and those shared with their teams."""
    qs = RequestTemplate.objects.select_related("owner", "team").filter(
        Q(owner=user) | Q(team__memberships__user=user)
    )
    if kind:
        qs = qs.filter(kind=kind)
    return qs.distinct().order_by("name", "id")


def request_template_for_user(user: User, template_id: int) -> RequestTemplate:
    """One template the user may use; ``RequestTemplate.DoesNotExist`` (→ 404) otherwise."""
    return request_templates_for(user).get(pk=template_id)


# --- what teams hold: quota usage and free capacity per class ---------------------------------


@dataclass(frozen=True)
class QuotaUsage:
    team: Team
    gpu_class: GpuClass
    guaranteed_milli: int
    limit_milli: int
    used_milli: int

    @property
    def borrowed_milli(self) -> int:
        return max(0, self.used_milli - self.guaranteed_milli)

    @property
    def within_guarantee_milli(self) -> int:
        return min(self.used_milli, self.guaranteed_milli)

    def percent(self, milli: int) -> float:
        return 0.0 if self.limit_milli <= 0 else round(100.0 * milli / self.limit_milli, 1)


def quota_usage_for_teams(teams: Iterable[Team]) -> list[QuotaUsage]:
    """Each quota of these teams with the milli-GPU their admitted and running workloads are
    charged (what the cluster grants them, ``replicas × charged_milli``).

    Four queries whatever the number of teams and classes.
    """
    team_ids = [t.pk for t in teams]
    quotas = list(
        TeamQuota.objects.filter(team_id__in=team_ids).select_related("team", "gpu_class")
    )
    used: dict[tuple[int, int], int] = {}
    active = (
        Workload.objects.units()
        .filter(  # a sweep is charged through its trials
            team_id__in=team_ids, state__in=core.ACTIVE_STATES
        )
        .values_list("team_id", "gpu_class_id", "charged_milli", "replicas")
    )
    for team_id, class_id, milli, replicas in active:
        used[(team_id, class_id)] = used.get((team_id, class_id), 0) + milli * replicas
    # In effect now: with the approved grants and open reservations (two more queries).
    now = timezone.now()
    grants = grant_specs(now=now)
    reserved: dict[tuple[str, str], int] = {}
    for b in active_bookings(now=now):
        reserved[(b.team, b.gpu_class)] = reserved.get((b.team, b.gpu_class), 0) + b.milli
    out = []
    for q in quotas:
        numbers = with_grants(
            QuotaNumbers(q.guaranteed_milli, q.limit_milli),
            grants,
            team=q.team.name,
            gpu_class=q.gpu_class.name,
            now=now,
        )
        extra = reserved.get((q.team.name, q.gpu_class.name), 0)
        out.append(
            QuotaUsage(
                team=q.team,
                gpu_class=q.gpu_class,
                guaranteed_milli=numbers.guaranteed_milli + extra,
                limit_milli=numbers.limit_milli + extra,
                used_milli=used.get((q.team_id, q.gpu_class_id), 0),
            )
        )
    return out


@dataclass(frozen=True)
class QuotaBar:
    """One quota as the portal draws it: a bar as wide as the limit, split into the part used
    within the guarantee and the borrowed part, with a mark where the guarantee ends."""

    usage: QuotaUsage
    within_percent: float
    borrowed_percent: float
    guarantee_percent: float

    @property
    def used(self) -> str:
        return format_milli(self.usage.used_milli)

    @property
    def within(self) -> str:
        return format_milli(self.usage.within_guarantee_milli)

    @property
    def borrowed(self) -> str:
        return format_milli(self.usage.borrowed_milli)

    @property
    def guaranteed(self) -> str:
        return format_milli(self.usage.guaranteed_milli)

    @property
    def limit(self) -> str:
        return format_milli(self.usage.limit_milli)

    @property
    def free(self) -> str:
        return format_milli(max(0, self.usage.limit_milli - self.usage.used_milli))


def quota_bars_for_teams(teams: Iterable[Team]) -> list[QuotaBar]:
    """``quota_usage_for_teams`` with the proportions a bar needs (percent of the limit)."""
    return [
        QuotaBar(
            usage=q,
            within_percent=min(100.0, q.percent(q.within_guarantee_milli)),
            borrowed_percent=min(
                100.0 - min(100.0, q.percent(q.within_guarantee_milli)),
                q.percent(q.borrowed_milli),
            ),
            guarantee_percent=min(100.0, q.percent(q.guaranteed_milli)),
        )
        for q in quota_usage_for_teams(teams)
    ]


@dataclass(frozen=True)
class GpuClassCapacity:
    gpu_class: GpuClass
    capacity_milli: int
    used_milli: int
    nodes: int
    from_inventory: bool

    @property
    def free_milli(self) -> int:
        return max(0, self.capacity_milli - self.used_milli)


def gpu_class_capacity(classes: QuerySet[GpuClass] | None = None) -> list[GpuClassCapacity]:
    """Capacity and free milli-GPU per class. Three queries whatever the number of classes.

    Capacity is the GPUs of ready, schedulable nodes of enabled clusters in the inventory;
    a class with no node in the inventory falls back to its admin-entered ``capacity_gpus``.
    Used is what admitted, starting and running workloads are charged, which is what the
    cluster grants them (``replicas × charged_milli``).
    """
    chosen = list(classes if classes is not None else gpu_classes_offered())
    ids = [c.pk for c in chosen]
    inventory = {
        row["gpu_class_id"]: (row["gpus"] or 0, row["nodes"] or 0)
        for row in ClusterNode.objects.filter(
            gpu_class_id__in=ids, cluster__enabled=True, ready=True, schedulable=True
        )
        .values("gpu_class_id")
        .annotate(gpus=Sum("gpu_count"), nodes=Count("id"))
    }
    used = dict(
        Workload.objects.units()
        .filter(gpu_class_id__in=ids, state__in=core.ACTIVE_STATES)
        .values("gpu_class_id")
        .annotate(milli=Sum(F("charged_milli") * F("replicas")))
        .values_list("gpu_class_id", "milli")
    )
    result = []
    for gpu_class in chosen:
        gpus, nodes = inventory.get(gpu_class.pk, (0, 0))
        from_inventory = nodes > 0
        capacity = gpus * 1000 if from_inventory else gpu_class.capacity_milli
        result.append(
            GpuClassCapacity(
                gpu_class=gpu_class,
                capacity_milli=capacity,
                used_milli=int(used.get(gpu_class.pk) or 0),
                nodes=nodes,
                from_inventory=from_inventory,
            )
        )
    return result


# --- what a request form offers: the classes a team may use ------------------------------------


@dataclass(frozen=True)
class ClassOffer:
    """An enabled GPU class as a team's request form shows it: usable when the team has a
    quota limit above zero (with what is left of it now), else the reason it is not."""

    gpu_class: GpuClass
    usage: QuotaUsage | None
    why_not: str = ""

    @property
    def usable(self) -> bool:
        return not self.why_not

    @property
    def left_milli(self) -> int:
        return 0 if self.usage is None else max(0, self.usage.limit_milli - self.usage.used_milli)


def class_offers_for_team(team: Team | None, *, admin: bool = False) -> list[ClassOffer]:
    """Every enabled class for ``team``'s request form, by name: those it has quota for are
    usable; the others say why not (no quota), and who may give it."""
    classes = list(gpu_classes_offered().order_by("name"))
    usages = {u.gpu_class.pk: u for u in quota_usage_for_teams([team])} if team is not None else {}
    who = rules.no_quota_advice(admin=admin)
    offers = []
    for gpu_class in classes:
        usage = usages.get(gpu_class.pk)
        why = ""
        if team is None:
            why = "choose a team first"
        elif usage is None or usage.limit_milli <= 0:
            why = f"{team.name} has no quota for it; {who}"
        offers.append(ClassOffer(gpu_class, usage, why))
    return offers


def usable_class_ids_for(teams: Iterable[Team]) -> set[int]:
    """The GPU classes any of ``teams`` has a quota limit above zero for."""
    return set(
        TeamQuota.objects.filter(team__in=list(teams), limit_milli__gt=0).values_list(
            "gpu_class_id", flat=True
        )
    )
