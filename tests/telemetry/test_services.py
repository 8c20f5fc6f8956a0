"""Ingestion, idle policy, node health and the usage pages on the database, with Prometheus's
answers given as plain data (the real chain is in test_chain.py)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from apps.catalog.models import Cluster
from apps.notifications.core import NoticeEvent
from apps.notifications.models import Delivery, Notice
from apps.telemetry import core, selectors, services
from apps.telemetry.models import IdleNotice, IdlePolicy, NodeHealthReport, UsageDay, WorkloadUsage
from apps.telemetry.selectors import top_idle_cost, usage_totals
from apps.workloads import core as wl
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


class FakePrometheus:
    """Answers instant queries with one value per (namespace, pod) for each DCGM metric."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], float] = {}
        self.queries: list[str] = []

    def query(self, promql: str, at: datetime | None = None) -> list[dict[str, Any]]:
        self.queries.append(promql)
        if "GPU_UTIL" not in promql:
            return []
        return [
            {
                "metric": {
                    "UUID": f"GPU-{i}",
                    "gpu": "0",
                    "Hostname": "h100-0",
                    "namespace": "gpu-operator",
                    "pod": "dcgm-exporter",
                    "exported_namespace": namespace,
                    "exported_pod": pod,
                },
                "value": [0, str(value)],
            }
            for i, ((namespace, pod), value) in enumerate(self.values.items())
        ]

    def close(self) -> None:
        return


def running(cast: Cast, **kw: Any) -> Workload:
    values: dict[str, Any] = {
        "team": cast.team,
        "owner": cast.owner,
        "gpu_class": cast.gpu_class,
        "state": wl.RUNNING,
        "started_at": T0 - timedelta(hours=1),
    }
    values.update(kw)
    return WorkloadFactory(**values)


def index_for(*workloads: Workload) -> dict[tuple[str, str], core.PodAllocation]:
    return {
        (w.team.namespace, f"wl-{w.pk}-0"): core.PodAllocation(w.pk, w.gpu_milli / 1000)
        for w in workloads
    }


def ingest(prom: FakePrometheus, index: dict[Any, Any], at: datetime) -> services.IngestResult:
    return services.telemetry_ingest(now=at, client=prom, pod_index=index)  # type: ignore[arg-type]


def test_ingestion_records_allocated_and_used_gpu_hours_and_cost(cast: Cast, settings: Any) -> None:
    settings.TELEMETRY_INGEST_SECONDS = 60
    job = running(cast, gpu_milli=2000)
    prom = FakePrometheus()
    prom.values[(cast.team.namespace, f"wl-{job.pk}-0")] = 50
    ingest(prom, index_for(job), T0)
    result = ingest(prom, index_for(job), T0 + timedelta(minutes=30))
    assert result.window_seconds == 600  # capped: a pass never accounts more than 10 minutes
    usage = WorkloadUsage.objects.get(workload=job)
    # 60 s + 600 s on 2 GPUs, half used.
    assert usage.allocated_gpu_seconds == pytest.approx(2 * 660)
    assert usage.used_gpu_seconds == pytest.approx(660)
    day = UsageDay.objects.get(workload=job)
    assert (day.team, day.owner, day.day) == (cast.team, cast.owner, date(2025, 3, 1))
    assert day.cost == core.price(2 * 660, Decimal("4.5"))
    assert any("avg_over_time(DCGM_FI_DEV_GPU_UTIL[600s])" in q for q in prom.queries)


def test_a_second_pass_at_the_same_moment_counts_nothing_twice(cast: Cast) -> None:
    job = running(cast)
    prom = FakePrometheus()
    prom.values[(cast.team.namespace, f"wl-{job.pk}-0")] = 90
    ingest(prom, index_for(job), T0)
    assert ingest(prom, index_for(job), T0).skipped
    assert UsageDay.objects.get(workload=job).allocated_gpu_seconds == pytest.approx(60)


def test_window_across_midnight_is_split_between_days(cast: Cast, settings: Any) -> None:
    settings.TELEMETRY_INGEST_SECONDS = 120
    job = running(cast)
    midnight = datetime(2025, 3, 2, tzinfo=UTC)
    ingest(FakePrometheus(), index_for(job), midnight + timedelta(seconds=30))
    days = dict(UsageDay.objects.filter(workload=job).values_list("day", "allocated_gpu_seconds"))
    assert days == {date(2025, 3, 1): pytest.approx(90), date(2025, 3, 2): pytest.approx(30)}


def test_unmeasured_workload_is_allocated_but_never_idle(cast: Cast) -> None:
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    for minutes in range(0, 120, 10):
        ingest(FakePrometheus(), index_for(notebook), T0 + timedelta(minutes=minutes))
    notebook.refresh_from_db()
    assert notebook.state == wl.RUNNING
    usage = WorkloadUsage.objects.get(workload=notebook)
    assert usage.allocated_gpu_seconds > 0 and usage.used_gpu_seconds == 0
    assert usage.idle_since is None and not IdleNotice.objects.exists()


def test_idle_notebook_is_warned_then_suspended_by_the_system(cast: Cast) -> None:
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    prom = FakePrometheus()
    prom.values[(cast.team.namespace, f"wl-{notebook.pk}-0")] = 1
    ingest(prom, index_for(notebook), T0)  # idle since T0 - 1 min
    ingest(prom, index_for(notebook), T0 + timedelta(minutes=19))
    assert IdleNotice.objects.filter(kind=IdleNotice.Kind.WARNED).count() == 1
    [warning] = Notice.objects.filter(user=cast.owner, event=NoticeEvent.IDLE_WARNING)
    assert warning.title == f"Notebook {notebook.name} will be suspended at 12:29 UTC"
    notebook.refresh_from_db()
    assert notebook.state == wl.RUNNING
    ingest(prom, index_for(notebook), T0 + timedelta(minutes=29))
    [suspended] = Notice.objects.filter(user=cast.owner, event=NoticeEvent.SUSPENDED)
    assert suspended.title == f"Notebook {notebook.name} was suspended"
    assert suspended.body.startswith("Suspended after 30 minutes idle")
    notebook.refresh_from_db()
    assert notebook.state == wl.SUSPENDED
    assert notebook.last_reason.startswith("Suspended after 30 minutes idle (GPU < 5%)")
    event = notebook.events.last()
    assert event is not None and event.actor is None
    notice = IdleNotice.objects.get(kind=IdleNotice.Kind.SUSPENDED)
    assert notice.allocated_gpus == 1.0


def test_notebook_busy_again_after_a_warning_is_kept_and_the_warning_resolved(cast: Cast) -> None:
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    prom = FakePrometheus()
    key = (cast.team.namespace, f"wl-{notebook.pk}-0")
    prom.values[key] = 0
    ingest(prom, index_for(notebook), T0)
    ingest(prom, index_for(notebook), T0 + timedelta(minutes=25))
    prom.values[key] = 80
    ingest(prom, index_for(notebook), T0 + timedelta(minutes=35))
    prom.values[key] = 0
    ingest(prom, index_for(notebook), T0 + timedelta(minutes=45))
    notebook.refresh_from_db()
    assert notebook.state == wl.RUNNING
    assert IdleNotice.objects.get().resolved_at is not None


def test_team_policy_overrides_the_default(cast: Cast) -> None:
    IdlePolicy.objects.create(team=cast.team, enabled=False)
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    prom = FakePrometheus()
    prom.values[(cast.team.namespace, f"wl-{notebook.pk}-0")] = 0
    for minutes in range(0, 180, 10):
        ingest(prom, index_for(notebook), T0 + timedelta(minutes=minutes))
    notebook.refresh_from_db()
    assert notebook.state == wl.RUNNING and not IdleNotice.objects.exists()
    assert WorkloadUsage.objects.get(workload=notebook).idle_since is not None


def test_idle_training_job_is_flagged_to_owner_and_team_lead(cast: Cast, settings: Any) -> None:
    settings.NOTIFY_EMAIL_ENABLED = True
    job = running(cast)
    prom = FakePrometheus()
    prom.values[(cast.team.namespace, f"wl-{job.pk}-0")] = 0
    for minutes in (0, 10, 20, 30, 40, 50, 60, 70):
        ingest(prom, index_for(job), T0 + timedelta(minutes=minutes))
    job.refresh_from_db()
    assert job.state == wl.RUNNING
    flag = IdleNotice.objects.get(workload=job, kind=IdleNotice.Kind.FLAGGED)
    told = Notice.objects.filter(key=f"idle-notice-{flag.pk}")
    assert {n.user_id for n in told} == {cast.owner.pk, cast.lead.pk}
    assert {n.event for n in told} == {NoticeEvent.IDLE_WARNING}
    mails = Delivery.objects.filter(notice__in=told, channel="email")
    assert {d.target for d in mails} == {cast.owner.email, cast.lead.email}
    assert cast.teammate.email not in {d.target for d in mails}


def test_pod_index_ignores_a_pod_labelled_for_a_workload_of_another_team(cast: Cast) -> None:
    job = running(cast)
    pods = [
        {
            "metadata": {
                "namespace": cast.team.namespace,
                "name": "a",
                "labels": {"gpupaas.io/workload-id": str(job.pk)},
            }
        },
        {
            "metadata": {
                "namespace": cast.other_team.namespace,
                "name": "b",
                "labels": {"gpupaas.io/workload-id": str(job.pk)},
            }
        },
    ]
    index = services.pod_index_build(pods, {job.pk: (cast.team.namespace, 500)})
    assert index == {(cast.team.namespace, "a"): core.PodAllocation(job.pk, 0.5)}


def test_node_health_is_judged_against_the_inventory() -> None:
    samples = [
        core.Sample(core.GPU_TEMP, {"UUID": f"GPU-{i}", "gpu": str(i), "Hostname": "h100-0"}, 40)
        for i in range(7)
    ]
    from apps.catalog.models import Cluster, ClusterNode

    cluster = Cluster.objects.create(name="c", kubeconfig_path="/x")
    ClusterNode.objects.create(cluster=cluster, name="h100-0", gpu_count=8)
    (report,) = services.node_health_store(core.node_health_from_samples(samples))
    assert report.verdict == NodeHealthReport.Verdict.FAILED
    assert report.expected_gpu_count == 8 and report.gpu_count == 7


# --- pages ---------------------------------------------------------------------------------


def usage_day(cast: Cast, workload: Workload, **kw: Any) -> UsageDay:
    values: dict[str, Any] = {
        "day": date.today(),
        "workload": workload,
        "team": workload.team,
        "owner": workload.owner,
        "gpu_class": workload.gpu_class,
        "allocated_gpu_seconds": 7200,
        "used_gpu_seconds": 3600,
        "cost": Decimal("9"),
    }
    values.update(kw)
    return UsageDay.objects.create(**values)


def login(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_team_usage_page_shows_members_and_hides_it_from_outsiders(cast: Cast) -> None:
    usage_day(cast, running(cast))
    page = login(cast.teammate).get(f"/usage/teams/{cast.team.slug}/")
    assert page.status_code == 200
    assert b"owner" in page.content and b"50%" in page.content
    assert login(cast.outsider).get(f"/usage/teams/{cast.team.slug}/").status_code == 404


def test_chargeback_csv_prices_each_team_user_and_class(cast: Cast) -> None:
    usage_day(cast, running(cast))
    other = running(cast, team=cast.other_team, owner=cast.outsider)
    usage_day(cast, other, cost=Decimal("4.5"), allocated_gpu_seconds=3600)
    month = f"{date.today():%Y-%m}"
    body = login(cast.admin).get(f"/usage/chargeback/?month={month}&format=csv").content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    assert {(r["team"], r["user"], r["allocated_gpu_hours"], r["cost"]) for r in rows} == {
        ("Vision", "owner", "2.000", "9.00"),
        ("NLP", "outsider", "1.000", "4.50"),
    }
    # A member sees only their teams' rows.
    body = login(cast.owner).get(f"/usage/chargeback/?month={month}&format=csv").content.decode()
    assert [r["team"] for r in csv.DictReader(io.StringIO(body))] == ["Vision"]


def test_suspended_notebook_resumes_in_one_click_from_its_notice(cast: Cast) -> None:
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    assert services.telemetry_idle_suspend(workload=notebook, reason="Suspended after idle.")
    home = login(cast.owner).get("/usage/")
    assert f"/usage/workloads/{notebook.pk}/resume/".encode() in home.content
    assert login(cast.outsider).post(f"/usage/workloads/{notebook.pk}/resume/").status_code == 404
    response = login(cast.owner).post(f"/usage/workloads/{notebook.pk}/resume/")
    assert response.status_code == 302
    notebook.refresh_from_db()
    assert notebook.state == wl.QUEUED


def test_idle_list_shows_reclaimed_gpu_hours_to_admins_only(cast: Cast) -> None:
    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development", gpu_milli=2000)
    services.telemetry_idle_suspend(workload=notebook, reason="idle")
    IdleNotice.objects.update(created_at=datetime.now(tz=UTC) - timedelta(hours=3))
    admin_page = login(cast.admin).get("/usage/idle/").content.decode()
    # All time does not depend on the calendar; this month's share is tested below.
    assert "GPU-hours reclaimed" in admin_page and "all time: 6.0 GPU-hours from 1." in admin_page
    assert "GPU-hours reclaimed" not in login(cast.owner).get("/usage/idle/").content.decode()


def test_this_months_reclaimed_hours_count_only_the_hours_inside_the_month(cast: Cast) -> None:
    month = datetime(2026, 12, 1, tzinfo=UTC)
    now = month + timedelta(hours=1)
    still = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development", gpu_milli=2000)
    ended = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development", gpu_milli=1000)
    services.telemetry_idle_suspend(workload=still, reason="idle")
    services.telemetry_idle_suspend(workload=ended, reason="idle")
    # Suspended at 22:00 on the last day of the month before and still suspended.
    IdleNotice.objects.filter(workload=still).update(created_at=month - timedelta(hours=2))
    # Suspended and resumed before the month began: it belongs to last month only.
    IdleNotice.objects.filter(workload=ended).update(
        created_at=month - timedelta(hours=5), resolved_at=month - timedelta(hours=4)
    )
    this_month = selectors.reclaimed(since=month, now=now)
    assert (this_month.suspensions, this_month.gpu_hours) == (1, 2.0)
    all_time = selectors.reclaimed(now=now)
    assert (all_time.suspensions, all_time.gpu_hours) == (2, 6.0 + 1.0)


def test_workload_usage_page_is_not_shown_to_outsiders(cast: Cast) -> None:
    job = running(cast)
    assert login(cast.owner).get(f"/usage/workloads/{job.pk}/").status_code == 200
    assert login(cast.outsider).get(f"/usage/workloads/{job.pk}/").status_code == 404


def test_idle_notices_tag_shows_the_users_own_notices_only(cast: Cast) -> None:
    from django.template import Context, Template
    from django.test import RequestFactory

    notebook = running(cast, kind=wl.KIND_NOTEBOOK, priority_class="development")
    services.telemetry_idle_suspend(workload=notebook, reason="Suspended after idle; resume.")
    tmpl = Template("{% load telemetry %}{% idle_notices %}")
    request = RequestFactory().get("/")
    request.user = cast.owner
    assert "Suspended after idle" in tmpl.render(Context({"request": request}))
    request.user = cast.outsider
    assert "Suspended after idle" not in tmpl.render(Context({"request": request}))


def test_ingest_task_does_nothing_when_telemetry_is_off(settings: Any) -> None:
    from apps.telemetry import tasks
    from apps.telemetry.models import IngestCursor

    settings.TELEMETRY_ENABLED = False
    tasks.ingest()
    assert not IngestCursor.objects.exists()


def test_ingest_task_records_an_unreachable_prometheus_and_keeps_the_window(
    settings: Any,
) -> None:
    from apps.telemetry import tasks
    from apps.telemetry.models import IngestCursor
    from tests.plugins.redis_server import free_port

    settings.TELEMETRY_ENABLED = True
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    tasks.ingest()
    cursor = IngestCursor.objects.get()
    assert cursor.until is None
    assert "Prometheus" in cursor.last_error


def test_telemetry_tasks_are_on_the_beat_schedule() -> None:
    from gpupaas.celery import app

    app.loader.import_default_modules()
    app.finalize()
    tasks = {entry["task"] for entry in app.conf.beat_schedule.values()}
    assert {"telemetry.ingest", "telemetry.node_health"} <= tasks


def test_unmeasured_time_is_no_data_in_the_totals_not_idle(cast: Cast) -> None:
    dark = running(cast)
    ingest(FakePrometheus(), index_for(dark), T0)
    day = UsageDay.objects.get(workload=dark)
    assert day.allocated_gpu_seconds > 0
    assert day.unmeasured_gpu_seconds == pytest.approx(day.allocated_gpu_seconds)
    first, end = date(2025, 3, 1), date(2025, 3, 2)
    (total,) = usage_totals(
        UsageDay.objects.filter(team=cast.team),
        ("gpu_class__name",),
        first,
        first + timedelta(days=1),
    )
    assert total.utilisation is None
    idle = {r["team__name"]: r["idle"] for r in top_idle_cost(first, end)}
    assert idle[cast.team.name] == pytest.approx(0)


def test_a_workload_on_a_burst_cluster_is_priced_at_that_cluster(cast: Cast) -> None:
    cloud = Cluster.objects.create(
        name="cloud",
        kubeconfig_path="/etc/kube/cloud",
        role=Cluster.Role.BURST,
        gpu_hourly_cost=Decimal("9.5"),
    )
    burst, home = running(cast, cluster=cloud), running(cast)
    prom = FakePrometheus()
    ingest(prom, index_for(burst, home), T0)
    assert UsageDay.objects.get(workload=burst).cost == core.price(60, Decimal("9.5"))
    assert UsageDay.objects.get(workload=home).cost == core.price(60, Decimal("4.5"))
