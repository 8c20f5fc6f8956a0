"""The API's paced list, quiet and beside the scheduler and the reconcile on the same database.

One run, one gunicorn, one PostgreSQL, one simulated cluster:

* quiet: vegeta offers ``GET /api/v1/workloads/?page=N`` (pages of 50 over a team's 10,000
  workloads, as in ``api_bench.py``) at 200 requests/s, open loop, for ``--duration`` s;
* busy: the same, while a separate process (a worker's stand-in) runs, back to back against
  the same database, the platform's periodic work: the scheduling cycle
  (``scheduling_cycle_run``, what the ``run_cycle`` task calls), the reconcile pass
  (``reconcile_pass``, what ``reconcile_all`` calls per cluster) and the status sync pass
  (``status_sync_pass``), over a backlog of 2,000 waiting workloads of 8 teams on the 4 GPU
  classes of kubesim's default topology. Pods run for ``--run-duration`` (20 s), so the
  cluster keeps turning over during the window: finished workloads free GPUs, the cycle
  admits more, the reconcile creates their Jobs.

Before the quiet row the cluster is filled (cycle, reconcile and status sync until the
first admissions run), so the busy window is the steady state of a full cluster with a
queue, not the first fill. The rows report p50/p90/p99/max and busy/quiet ratios, and how
many cycles, reconcile passes and status syncs ran inside the busy window (with what they
admitted and created), so that the load is seen to be real. The background loop runs with
no pause, more often than beat asks (cycle every 5 s, reconcile every 15 s, status sync
every 3 s by default): the worst a worker on this machine can do. ``--pause`` adds a pause.

    .venv/bin/python bench/api_mix_bench.py [--duration 30] [--rate 200] [--backlog 2000]

Needs what api_bench.py needs for its paced rows (vegeta, PostgreSQL, redis-server; wrk is
not used) and Go for kubesim. Drops and recreates its own database (gpupaas_bench_api_mix) at start.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import api_bench
from api_bench import Result, free_port, run_vegeta, vegeta_binary, wait_for, write_targets

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
DB_NAME = "gpupaas_bench_api_mix"
DB_URL = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
BACKLOG_TEAMS = 8
# (sharing mode of the GPU class, milli-GPUs per workload): kubesim's default topology has
# whole H100s, time-sliced L40S, MIG A100s and HAMi vGPUs.
BACKLOG_MIX = [("whole", 1000), ("timeslice", 250), ("mig", 125), ("mig", 500), ("hami", 100)]


def seed_backlog(cluster_kubeconfig: Path, backlog: int, run_duration: str) -> int:
    """The cluster, 8 teams with quotas on every class, ``backlog`` waiting workloads."""
    from django.db import connection

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.workloads import core as wl
    from apps.workloads.models import Workload
    from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, UserFactory

    cluster = Cluster.objects.create(name="bench", kubeconfig_path=str(cluster_kubeconfig))
    services.cluster_inventory_sync(cluster=cluster)
    classes = {c.sharing_mode: c for c in GpuClass.objects.exclude(sharing_mode="")}
    image = Image.objects.get(name="PyTorch training")
    teams, owners = [], []
    for t in range(BACKLOG_TEAMS):
        team = TeamFactory(name=f"Mix {t}")
        for gpu_class in classes.values():
            # A guarantee below a fair share, a limit far above: teams borrow, the cluster is
            # the bound, and the cycle weighs fair share and borrowing on every pass.
            TeamQuotaFactory(
                team=team, gpu_class=gpu_class, guaranteed_milli=1000, limit_milli=10**6
            )
        services.team_namespace_ensure(team=team)
        owner = UserFactory(username=f"mix{t}")
        MembershipFactory(user=owner, team=team)
        teams.append(team)
        owners.append(owner)
    priorities = [wl.PRIORITY_TRAINING, wl.PRIORITY_BATCH]
    rows = []
    for i in range(backlog):
        mode, milli = BACKLOG_MIX[i % len(BACKLOG_MIX)]
        t = (i // len(BACKLOG_MIX)) % BACKLOG_TEAMS
        rows.append(
            Workload(
                name=f"mix-{i}",
                kind=wl.KIND_TRAINING,
                owner=owners[t],
                team=teams[t],
                gpu_class=classes[mode],
                image=image,
                gpu_milli=milli,
                charged_milli=milli,
                replicas=1,
                priority_class=priorities[i % len(priorities)],
                command=["python", "train.py", f"--seed={i}"],
                params={"pod_annotations": {"kubesim.io/run-duration": run_duration}},
                state=wl.PENDING,
            )
        )
    Workload.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # as autovacuum leaves tables after a load
    return int(cluster.pk)


def background_round(cluster: Any) -> dict[str, Any]:
    """One round of the periodic work: a cycle, a reconcile pass, a status sync pass."""
    from apps.orchestration import services
    from apps.scheduling.services import scheduling_cycle_run

    out: dict[str, Any] = {}
    t0 = time.time()
    run = scheduling_cycle_run()
    t1 = time.time()
    out["cycle"] = [t0, t1, len(run.admitted), run.waiting]
    rec = services.reconcile_pass(cluster=cluster)
    t2 = time.time()
    out["reconcile"] = [t1, t2, rec.created, rec.deleted + rec.orphans_deleted, len(rec.errors)]
    sync = services.status_sync_pass(cluster=cluster)
    t3 = time.time()
    out["sync"] = [t2, t3, sync.transitions]
    return out


def background_loop(cluster_id: int, stop_file: Path, out_file: Path, pause: float) -> int:
    """The worker's stand-in: rounds until ``stop_file`` exists; every round to ``out_file``."""
    import django

    django.setup()
    from apps.catalog.models import Cluster

    cluster = Cluster.objects.get(pk=cluster_id)
    rounds: list[dict[str, Any]] = []
    try:
        while not stop_file.exists():
            rounds.append(background_round(cluster))
            if pause:
                time.sleep(pause)
    except Exception as exc:  # the window is then not busy to its end: say so, keep the rest
        rounds.append({"failed": [time.time(), f"{type(exc).__name__}: {exc}"]})
        raise
    finally:
        out_file.write_text(json.dumps(rounds))
    return 0


def fill_cluster(cluster_id: int, seconds: float) -> tuple[int, int]:
    """Rounds until the first admissions run (or ``seconds``): (running, waiting)."""
    from apps.catalog.models import Cluster
    from apps.workloads import core as wl
    from apps.workloads.models import Workload

    cluster = Cluster.objects.get(pk=cluster_id)
    deadline = time.monotonic() + seconds
    running = 0
    while time.monotonic() < deadline:
        background_round(cluster)
        running = Workload.objects.filter(state=wl.RUNNING, team__slug__startswith="mix-").count()
        if running >= 100:
            break
        time.sleep(0.5)
    waiting = Workload.objects.filter(
        state__in=wl.WAITING_STATES, team__slug__startswith="mix-"
    ).count()
    return running, waiting


def in_window(rounds: list[dict[str, Any]], key: str, start: float, end: float) -> list[list[Any]]:
    """The runs of one kind that overlapped [start, end] (in progress at some point in it)."""
    return [r[key] for r in rounds if key in r and r[key][0] < end and r[key][1] > start]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000, help="the listed team's workloads")
    parser.add_argument("--backlog", type=int, default=2000, help="waiting workloads, 8 teams")
    parser.add_argument("--duration", type=int, default=30, help="seconds per measurement")
    parser.add_argument("--rate", type=float, default=200.0, help="paced offered load, req/s")
    parser.add_argument("--workers", type=int, default=api_bench.WORKERS, help="gunicorn workers")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before each row")
    parser.add_argument("--run-duration", default="20s", help="how long each backlog pod runs")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between rounds")
    parser.add_argument("--background-loop", nargs=3, metavar=("CLUSTER", "STOP", "OUT"))
    args = parser.parse_args()
    if args.background_loop:
        cluster_id, stop, out = args.background_loop
        return background_loop(int(cluster_id), Path(stop), Path(out), args.pause)
    vegeta_binary()

    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="gpupaas-api-mix-bench-"))
    redis_port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.production",
        "DATABASE_URL": DB_URL,
        "SECRET_KEY": secrets.token_urlsafe(48),
        "SECURE_SSL_REDIRECT": "false",
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "API_RATE_LIMIT": "1000000/min",
        "API_RATE_LIMIT_PER_ADDRESS": "1000000/min",
        "LOG_LEVEL": "WARNING",
        "GPUPAAS_VAR_DIR": str(work),
        "PYTHONPATH": os.pathsep.join(
            [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    os.environ.update(env)
    api_bench.DB_NAME = DB_NAME
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    gunicorn: subprocess.Popen[bytes] | None = None
    background: subprocess.Popen[bytes] | None = None
    kubesim: Any = None
    try:
        api_bench.recreate_database()
        mark = time.perf_counter()
        token, _ = api_bench.seed(args.rows)
        from django.core.management import call_command

        from apps.workloads import core as wl
        from apps.workloads.models import Workload
        from deploy.devtools import kubesim as ks

        # The listed team's rows are its history: none live, so that neither the cycle nor
        # the reconcile acts on rows that never had a cluster. The live load is the backlog.
        Workload.objects.filter(team__slug="vision", state__in=wl.ACTIVE_STATES).update(
            state=wl.SUCCEEDED
        )
        Workload.objects.filter(team__slug="vision", state__in=wl.WAITING_STATES).update(
            state=wl.CANCELLED
        )
        call_command("seed_demo", verbosity=0)  # the GPU classes of kubesim's topology
        kubesim = ks.start(work / "kubesim")
        cluster_id = seed_backlog(kubesim.kubeconfig, args.backlog, args.run_duration)
        print(f"seeded {args.rows} listed workloads and a backlog of {args.backlog}"
              f" in {time.perf_counter() - mark:.1f} s")  # fmt: skip
        mark = time.perf_counter()
        running, waiting = fill_cluster(cluster_id, 120)
        print(f"cluster filled in {time.perf_counter() - mark:.1f} s:"
              f" {running} backlog workloads running, {waiting} waiting")  # fmt: skip
        from django.db import connections

        connections.close_all()

        port = free_port()
        base = f"http://127.0.0.1:{port}"
        gunicorn = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "--config", "python:gpupaas.gunicorn_conf",
                "--workers", str(args.workers),
                "--bind", f"127.0.0.1:{port}",
                "--log-level", "warning",
                "gpupaas.asgi:application",
            ],
            cwd=REPO_ROOT,
            env=env,
        )  # fmt: skip
        wait_for(f"{base}/healthz")
        pages = max(1, args.rows // 50)
        targets = write_targets(work, base, "list", token, pages, "")
        run_vegeta("warm-up", targets, args.rate, 3)  # both workers warm before measuring

        time.sleep(args.settle)
        quiet = run_vegeta(f"list, paced {args.rate:g}/s, quiet", targets, args.rate, args.duration)

        stop, out = work / "stop", work / "rounds.json"
        background = subprocess.Popen(
            [sys.executable, __file__, "--pause", str(args.pause),
             "--background-loop", str(cluster_id), str(stop), str(out)],
            cwd=REPO_ROOT, env=env,
        )  # fmt: skip
        time.sleep(args.settle)  # its first round under way before the window opens
        start = time.time()
        busy = run_vegeta(f"list, paced {args.rate:g}/s, busy", targets, args.rate, args.duration)
        end = time.time()
        stop.touch()
        background.wait(timeout=600)
        background = None
        rounds: list[dict[str, Any]] = json.loads(out.read_text())
    finally:
        if background is not None:
            background.terminate()
            background.wait(timeout=30)
        if gunicorn is not None:
            gunicorn.terminate()
            gunicorn.wait(timeout=30)
        if kubesim is not None:
            kubesim.stop()
        redis.terminate()
        redis.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)

    for r in rounds:
        if "failed" in r:
            print(
                f"the background loop stopped at {r['failed'][0] - start:+.1f} s: {r['failed'][1]}"
            )
    cycles = in_window(rounds, "cycle", start, end)
    passes = in_window(rounds, "reconcile", start, end)
    syncs = in_window(rounds, "sync", start, end)
    print()
    print(
        f"gunicorn {args.workers} uvicorn workers; vegeta, open loop, "
        f"≤ {api_bench.CONNECTIONS} connections; {args.duration} s per row; "
        f"{os.cpu_count()} CPUs shared by all (gunicorn, PostgreSQL, kubesim, the loop, vegeta)"
    )
    print(
        f"1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
        "(other processes share these CPUs)"
    )
    print()
    header = f"{'measurement':<34}{'req/s':>8}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}"
    print(header + f"{'errors':>8}")
    row: Result
    for row in (quiet, busy):
        errors = row.socket_errors + row.non2xx
        print(
            f"{row.label:<34}{row.rps:>8.1f}{row.p50_ms:>9.1f}{row.p90_ms:>9.1f}"
            f"{row.p99_ms:>9.1f}{row.max_ms:>9.0f}{errors:>8}"
        )

    def ratio(b: float, q: float) -> str:
        return f"{b / q:.2f}×" if q else "-"

    print(
        f"{'busy / quiet':<34}{'':>8}{ratio(busy.p50_ms, quiet.p50_ms):>9}"
        f"{ratio(busy.p90_ms, quiet.p90_ms):>9}{ratio(busy.p99_ms, quiet.p99_ms):>9}"
        f"{ratio(busy.max_ms, quiet.max_ms):>9}"
    )
    print()
    window = end - start

    def durations(runs: list[list[Any]]) -> str:
        if not runs:
            return "none"
        ms = [(r[1] - r[0]) * 1000 for r in runs]
        return f"p50 {statistics.median(ms):.0f} ms, max {max(ms):.0f} ms"

    covered = sum(
        min(end, r[k][1]) - max(start, r[k][0])
        for r in rounds
        for k in ("cycle", "reconcile", "sync")
        if k in r and r[k][0] < end and r[k][1] > start
    )
    print(
        f"during the busy window ({window:.1f} s), against the same PostgreSQL, runs in"
        f" progress at some point in it (the loop was working {covered / window:.0%} of it):"
    )
    print(
        f"  scheduling cycles : {len(cycles)} ({durations(cycles)}); admitted "
        f"{sum(c[2] for c in cycles)}, waiting at the last {cycles[-1][3] if cycles else '-'}"
    )
    print(
        f"  reconcile passes  : {len(passes)} ({durations(passes)}); created "
        f"{sum(p[2] for p in passes)}, deleted {sum(p[3] for p in passes)},"
        f" errors {sum(p[4] for p in passes)}"
    )
    print(
        f"  status sync passes: {len(syncs)} ({durations(syncs)}); transitions "
        f"{sum(s[2] for s in syncs)}"
    )
    ok = busy.p99_ms < 100 and busy.rps >= 0.95 * args.rate and busy.non2xx == 0
    print()
    print(
        f"target: list p99 < 100 ms at {args.rate:g} req/s under the mix → "
        f"{'met' if ok else 'NOT met'} (busy p99 {busy.p99_ms:.1f} ms, quiet {quiet.p99_ms:.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
