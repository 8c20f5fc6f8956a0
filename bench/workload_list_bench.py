"""The portal's workloads list at 10,000 workloads.

One team holds 10,000 workloads (mixed kinds, states, images and commands, created over 90
days); another team as many again. A member's pages are rendered through Django's test
client, template included: the first page, a middle and the last page newest first, a middle
page sorted by name, a search that matches the command, and a state filter with a date range.

Baseline, measured in the same run: the same pages from an ORM queryset of the same filter
(``workloads_filtered`` with ``select_related``) through Django's Paginator and the same
template — what a list written the usual way costs.

    .venv/bin/python bench/workload_list_bench.py [--rows 10000] [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_workload_list"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"


def recreate_database() -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", DB_NAME], check=True, env=env)
    subprocess.run(["createdb", *base, DB_NAME], check=True, env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()

    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from apps.accounts.models import Membership, Team, User
    from apps.catalog.models import GpuClass, Image
    from apps.web.views import workload_list as view
    from apps.workloads import core as wl
    from apps.workloads.models import Workload
    from apps.workloads.selectors import workloads_filtered

    call_command("migrate", verbosity=0)
    gpu = GpuClass.objects.create(name="H100-80GB", product_label="H100", memory_mib=81920)
    images = [
        Image.objects.create(name="PyTorch", reference="nvcr.io/nvidia/pytorch:24.12-py3"),
        Image.objects.create(name="HF", reference="ghcr.io/huggingface/transformers:4.46"),
    ]
    teams = [
        Team.objects.create(name=f"Team {i}", slug=f"team{i}", namespace=f"team-team{i}")
        for i in range(2)
    ]
    users = [User.objects.create(username=f"user{i}") for i in range(20)]
    member = users[0]
    Membership.objects.create(user=member, team=teams[0])
    states = [wl.SUCCEEDED, wl.FAILED, wl.RUNNING, wl.QUEUED, wl.CANCELLED]
    kinds = [wl.KIND_TRAINING, wl.KIND_NOTEBOOK, wl.KIND_TRAINING]
    now = timezone.now()
    mark = time.perf_counter()
    for t, team in enumerate(teams):
        Workload.objects.bulk_create(
            [
                Workload(
                    name=f"run-{(i * 7919) % args.rows:05d}",
                    kind=kinds[i % 3],
                    state=states[i % 5],
                    owner=users[i % 20],
                    team=team,
                    gpu_class=gpu,
                    image=images[i % 2],
                    command=["python", "finetune.py" if i % 10 == 0 else "train.py"],
                    gpu_milli=1000,
                    charged_milli=1000,
                    priority_class="training",
                    created_at=now - timedelta(minutes=13 * i + t),
                )
                for i in range(args.rows)
            ],
            batch_size=2000,
        )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE workloads_workload")
    print(f"seeded {Workload.objects.count()} workloads in {time.perf_counter() - mark:.1f} s")

    last = (args.rows + view.PAGE_SIZE - 1) // view.PAGE_SIZE
    middle = last // 2
    day = (now - timedelta(days=30)).date()
    cases = {
        "first page": "",
        f"page {middle}": f"page={middle}",
        f"last page ({last})": f"page={last}",
        f"page {middle}, by name": f"page={middle}&sort=name",
        "search command": "q=finetune",
        "state + 7 days": f"state=finished&created_from={day}&created_to={day + timedelta(days=7)}",
    }
    browser = Client()
    browser.force_login(member)

    def timed(path: str) -> tuple[float, float, int]:
        browser.get(path)  # warm-up
        runs = []
        for _ in range(args.runs):
            begin = time.perf_counter()
            with CaptureQueriesContext(connection) as ctx:
                response = browser.get(path)
            runs.append(time.perf_counter() - begin)
            assert response.status_code == 200, (path, response.status_code)
        runs.sort()
        return (
            statistics.median(runs) * 1000,
            runs[int(len(runs) * 0.95) - 1] * 1000,
            len(ctx.captured_queries),
        )

    ours = {name: timed(f"/workloads/?{query}") for name, query in cases.items()}

    # The baseline: the same view with the ORM queryset in place of the fixed-SQL listing.
    class OrmListing:
        def __init__(self, user: Any, filters: Any, columns: Any) -> None:
            self.qs = workloads_filtered(user, filters).select_related(
                "team", "owner", "gpu_class", "image"
            )
            self.columns = columns

        def count(self) -> int:
            return int(self.qs.count())

        def __getitem__(self, page: slice) -> list[dict[str, Any]]:
            return list(self.qs[page].values(*self.columns))

    fixed = view.WorkloadListing
    view.WorkloadListing = OrmListing  # type: ignore[misc,assignment]
    try:
        baseline = {name: timed(f"/workloads/?{query}") for name, query in cases.items()}
    finally:
        view.WorkloadListing = fixed  # type: ignore[misc]

    print(f"\n{args.rows} workloads per team, 2 teams; {args.runs} runs each; ms")
    heads = ("ours p50", "p95", "queries", "ORM p50", "p95", "ratio")
    print(f"{'page':28} " + " ".join(f"{h:>9}" for h in heads))
    for name in cases:
        o, b = ours[name], baseline[name]
        print(
            f"{name:28} {o[0]:9.1f} {o[1]:9.1f} {o[2]:9d} {b[0]:9.1f} {b[1]:9.1f}"
            f" {b[0] / o[0]:9.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
