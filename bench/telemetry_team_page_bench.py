"""The team usage page for 30 days of 1,000 GPUs.

One team runs 1,000 one-GPU workloads every day for 30 days (30,000 daily accounting rows);
four other teams as much again (150,000 rows in the table). The page — allocated vs used per
day and GPU class, and the per-user table — is rendered through Django's test client as a
signed-in team lead, including template rendering.

Baseline, measured in the same run: the same figures summed in Python from every row of the
team (no aggregation in PostgreSQL).

    .venv/bin/python bench/telemetry_team_page_bench.py [--gpus 1000] [--days 30] [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_telemetry_page"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--teams", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from apps.accounts.models import Membership, Team, User
    from apps.catalog.models import GpuClass, Image
    from apps.telemetry.models import UsageDay
    from apps.workloads import core as wl
    from apps.workloads.models import Workload

    call_command("migrate", verbosity=0)
    classes = [
        GpuClass.objects.create(name=n, product_label=n, memory_mib=81920, hourly_cost=c)
        for n, c in (("H100-80GB", "4.5"), ("A100-80GB", "2.5"), ("L40S-48GB", "1.2"))
    ]
    image = Image.objects.create(name="pytorch", reference="nvcr.io/nvidia/pytorch:24.12-py3")
    teams = [
        Team.objects.create(name=f"Team {i}", slug=f"team{i}", namespace=f"team-team{i}")
        for i in range(args.teams)
    ]
    users = [User.objects.create(username=f"user{i}") for i in range(100)]
    lead = users[0]
    Membership.objects.create(user=lead, team=teams[0], role=Membership.Role.LEAD)
    today = timezone.now().date()
    mark = time.perf_counter()
    for t, team in enumerate(teams):
        workloads = Workload.objects.bulk_create(
            [
                Workload(
                    name=f"t{t}-w{i}",
                    kind=wl.KIND_TRAINING,
                    state=wl.RUNNING,
                    owner=users[i % len(users)],
                    team=team,
                    gpu_class=classes[i % 3],
                    gpu_milli=1000,
                    charged_milli=1000,
                    priority_class="training",
                    image=image,
                )
                for i in range(args.gpus)
            ],
            batch_size=2000,
        )
        rows = []
        for day in range(args.days):
            for i, workload in enumerate(workloads):
                used = 86400 * ((i * 7 + day * 13) % 100) / 100
                rows.append(
                    UsageDay(
                        day=today - timedelta(days=day),
                        workload=workload,
                        team=team,
                        owner=workload.owner,
                        gpu_class=workload.gpu_class,
                        allocated_gpu_seconds=86400.0,
                        used_gpu_seconds=used,
                        cost=Decimal("108") if i % 3 == 0 else Decimal("60"),
                    )
                )
        UsageDay.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE telemetry_usageday")
    total_rows = UsageDay.objects.count()
    print(f"seeded {total_rows} daily rows in {time.perf_counter() - mark:.1f} s")

    browser = Client()
    browser.force_login(lead)
    url = f"/usage/teams/{teams[0].slug}/"
    assert browser.get(url).status_code == 200  # warm-up
    page_runs = []
    for _ in range(args.runs):
        mark = time.perf_counter()
        response = browser.get(url)
        page_runs.append(time.perf_counter() - mark)
        assert response.status_code == 200

    baseline_runs = []
    start = today - timedelta(days=args.days - 1)
    for _ in range(max(3, args.runs // 4)):
        mark = time.perf_counter()
        per_day: dict[tuple[object, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
        per_user: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for row in UsageDay.objects.filter(team=teams[0], day__gte=start).select_related(
            "gpu_class", "owner"
        ):
            per_day[(row.day, row.gpu_class.name)][0] += row.allocated_gpu_seconds
            per_day[(row.day, row.gpu_class.name)][1] += row.used_gpu_seconds
            key = (row.owner.username, row.gpu_class.name)
            per_user[key][0] += row.allocated_gpu_seconds
            per_user[key][1] += row.used_gpu_seconds
            per_user[key][2] += float(row.cost)
        baseline_runs.append(time.perf_counter() - mark)

    page = statistics.median(page_runs)
    baseline = statistics.median(baseline_runs)
    p95 = sorted(page_runs)[round(0.95 * (len(page_runs) - 1))]
    print()
    print(
        f"team usage page, {args.days} days × {args.gpus} GPUs ({args.days * args.gpus} rows of "
        f"the team, {total_rows} in all): median {page * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms "
        "(target < 1 s)"
    )
    print(
        f"baseline (every row summed in Python, no page rendering): {baseline * 1000:.0f} ms "
        f"→ {baseline / page:.1f}× slower"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
