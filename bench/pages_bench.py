"""Portal pages at scale: 10,000 workloads and 300 teams, beside the same pages with 100.

The pages (the dashboard, its workloads list, the team page, and the workloads list page at
/workloads/ where this version has one) are rendered through Django's test client as a
signed-in team lead, templates included, against PostgreSQL. The lead's team holds 30% of
the workloads, the other 299 teams the rest; states are mixed (running, waiting,
succeeded, failed). Per page: server time p50 / p95 over ``--runs`` requests and the number
of SQL statements of one request (and the p95 of the server process's CPU time, which a
shared machine's load does not inflate as much), at 100 workloads and at ``--workloads``,
in the same run. A constant number of statements is the check that no page issues a query per row.

    .venv/bin/python bench/pages_bench.py [--workloads 10000] [--teams 300] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_pages"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
SMALL = 100


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class StatementCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.count += 1
        return execute(sql, params, many, context)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=300)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import NoReverseMatch, Resolver404, resolve

    from apps.accounts.models import Membership, Team, User
    from apps.catalog.models import GpuClass, Image
    from apps.workloads import core as wl
    from apps.workloads.models import Workload

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    classes = list(GpuClass.objects.all())
    image = Image.objects.first()
    assert image is not None
    teams = [
        Team.objects.create(name=f"Scale {i}", slug=f"scale{i}", namespace=f"team-scale{i}")
        for i in range(args.teams)
    ]
    users = [User.objects.create(username=f"scale-user{i}") for i in range(200)]
    lead = users[0]
    Membership.objects.create(user=lead, team=teams[0], role=Membership.Role.LEAD)
    for i, user in enumerate(users[1:], start=1):
        Membership.objects.create(user=user, team=teams[i % args.teams])
    states = [wl.RUNNING] * 3 + [wl.PENDING] * 3 + [wl.SUCCEEDED] * 3 + [wl.FAILED]

    def seed(n: int) -> None:
        Workload.objects.all().delete()
        rows = []
        for i in range(n):
            team_index = 0 if i % 10 < 3 else 1 + i % (args.teams - 1)
            owner = lead if team_index == 0 else users[1 + (i % (len(users) - 1))]
            rows.append(
                Workload(
                    name=f"w{i}",
                    kind=wl.KIND_TRAINING,
                    state=states[i % len(states)],
                    owner=owner,
                    team=teams[team_index],
                    gpu_class=classes[i % len(classes)],
                    gpu_milli=1000,
                    charged_milli=1000,
                    priority_class=wl.PRIORITY_ORDER[i % 4],
                    image=image,
                    command=["python", "train.py"],
                )
            )
        Workload.objects.bulk_create(rows, batch_size=2000)
        # As autovacuum leaves a table that grew over weeks: statistics, visibility map and
        # hint bits set (fresh rows straight after a bulk insert make every index-only scan
        # visit the heap, a state no running portal stays in).
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")

    pages = {
        "dashboard": "/",
        "dashboard workloads list": "/partials/dashboard/workloads/",
        "team page": f"/teams/{teams[0].slug}/",
        "workloads list page": "/workloads/",
    }
    available = {}
    for name, url in pages.items():
        try:
            resolve(url)
        except (Resolver404, NoReverseMatch):
            print(f"({name} {url}: not in this version, left out)")
            continue
        available[name] = url

    browser = Client()
    browser.force_login(lead)
    results: dict[tuple[str, int], tuple[float, float, int, float]] = {}
    for size in (SMALL, args.workloads):
        seed(size)
        for name, url in available.items():
            response = browser.get(url)  # warm-up
            assert response.status_code == 200, (url, response.status_code)
            # Django clears its own query log when a request starts: count at the cursor.
            counter = StatementCounter()
            with connection.execute_wrapper(counter):
                browser.get(url)
            times, cpu = [], []
            for _ in range(args.runs):
                mark, cpu_mark = time.perf_counter(), time.process_time()
                response = browser.get(url)
                times.append(time.perf_counter() - mark)
                cpu.append(time.process_time() - cpu_mark)
                assert response.status_code == 200
            results[(name, size)] = (
                statistics.median(times) * 1000,
                pct(times, 0.95) * 1000,
                counter.count,
                pct(cpu, 0.95) * 1000,
            )
    print(
        f"\n{args.teams} teams; the lead's team holds 30% of the workloads;"
        f" {args.runs} requests per page\n"
    )
    print(
        f"| page | {SMALL} workloads: p50 / p95 ms (CPU p95) | queries"
        f" | {args.workloads} workloads: p50 / p95 ms (CPU p95) | queries | p95 ratio"
        " | target p95 < 150 ms |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in available:
        s50, s95, sq, sc = results[(name, SMALL)]
        b50, b95, bq, bc = results[(name, args.workloads)]
        print(
            f"| {name} | {s50:.1f} / {s95:.1f} ({sc:.1f}) | {sq} | {b50:.1f} / {b95:.1f}"
            f" ({bc:.1f}) | {bq} | {b95 / s95:.2f}x | {'met' if b95 < 150 else 'NOT met'}"
            f"{'' if sq == bq else ' (queries grow)'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
