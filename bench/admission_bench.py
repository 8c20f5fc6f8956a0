"""End-to-end admission beside Kueue: the same Jobs, the same quotas, the same simulated cluster.

Each system in turn gets a fresh kubesim (``--nodes`` H100 nodes of 8 GPUs) and the same
``--jobs`` Jobs (mixed shapes: 1, 2, 4 and 8 GPUs; ``--teams`` teams; the four priority
classes; each pod runs ``--run-seconds``), submitted by 8 client threads as fast as the
system takes them:

* gpupaas, one process per part as deployed: web workers calling ``workload_submit`` (the
  request rules, PostgreSQL), a scheduling worker running the cycle back to back (as a busy
  worker runs one for all submits that arrived meanwhile), a reconcile worker whose 8
  threads run ``workload_reconcile`` for each admitted workload (as the Celery workers do),
  the watch (``ClusterWatch``) turning pod and Job changes into states, which frees quota
  for the next cycle;
* Kueue (``--kueue-version``, v0.19.2 by default; built with ``go install``, cached under
  ~/.cache/gpupaas/kueue): its CRDs, a ResourceFlavor for the H100 nodes, a ClusterQueue per
  team (nominal quota = the team's guarantee, borrowing limit = limit − guarantee, one cohort),
  a Cohort holding the GPUs no team is guaranteed (as gpupaas lends them), a LocalQueue per
  team namespace, four WorkloadPriorityClasses; Jobs created suspended with the queue label.

Both sides are observed the same way, by the benchmark's own watch of the cluster: admitted =
the Job first seen not suspended (Kueue unsuspends it, gpupaas creates it once admitted),
running = its pod first seen Running. CPU is counted for the run's own processes only
(``CpuMeter``).

Per system: admissions per second (admitted ÷ time from the first submit to the last
admission), submit → admitted and submit → running p50 / p99, and the allocation while the cluster
is full (GPUs of running pods per team and class when the last Job has been submitted).

The parts are in bench/admission: jobs (the Jobs, a run's timings, the pod watch), ours
(gpupaas's processes), kueue (Kueue's).

Run: .venv/bin/python bench/admission_bench.py [--jobs 15000] [--teams 30] [--nodes 64]
                                               [--run-seconds 30] [--only gpupaas|kueue]
                                               [--web-processes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # the repository: bench.admission, apps, deploy

from bench.admission.jobs import (  # noqa: E402
    CLASSES,
    DB_NAME,
    KUEUE_VERSION,
    SHAPES,
    CpuMeter,
    Run,
    make_jobs,
    pct,
    topology,
)
from bench.admission.kueue import run_kueue  # noqa: E402
from bench.admission.ours import run_gpupaas  # noqa: E402


def recreate_database(name: str) -> None:
    env = {**os.environ, "PGPASSWORD": "gpupaas"}
    base = ["-h", "127.0.0.1", "-U", "gpupaas"]
    subprocess.run(["dropdb", *base, "--if-exists", name], check=True, env=env)
    subprocess.run(["createdb", *base, name], check=True, env=env)


def apiserver_requests(kubeconfig: Path) -> Counter[str]:
    """Requests the API server has answered so far, per verb (its own /metrics)."""
    from kubernetes import config as k8s_config

    api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
    try:
        response = api.call_api(
            "/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False
        )[0]
        text = response.data.decode()
    finally:
        api.close()
    per_verb: Counter[str] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        verb = labels.split('verb="', 1)[1].split('"', 1)[0] if 'verb="' in labels else "?"
        per_verb[verb] += int(float(value))
    return per_verb


def with_cluster(nodes: int, fn: Callable[[Any, Path, CpuMeter], Run]) -> Run:
    """A fresh cluster for one system's run; its CPU is metered from the cluster's READY on,
    for the run's own processes only (``CpuMeter``), until the system's run stops the meter
    at its last Job running."""
    from deploy.devtools import kubesim as ks

    with tempfile.TemporaryDirectory(prefix="admission-bench-") as tmp:
        workdir = Path(tmp)
        topo = workdir / "topology.yaml"
        topo.write_text(topology(nodes))
        cluster = ks.start(workdir / "kubesim", topology=topo)
        meter = CpuMeter(database=DB_NAME)
        meter.add_root(cluster.pid, "cluster (kubesim)")
        meter.start()
        try:
            run = fn(cluster, workdir, meter)
            if not run.cpu:
                run.cpu = meter.stop()
            try:
                run.requests = apiserver_requests(cluster.kubeconfig)
            except Exception as exc:  # a figure less, not a failed run
                run.notes.append(f"apiserver metrics: {exc}")
            return run
        finally:
            cluster.stop()


def describe_allocation(run: Run, capacity: int) -> str:
    team = run.allocation.get("team") or Counter()
    klass = run.allocation.get("class") or Counter()
    used = sum(team.values())
    values = sorted(team.values()) or [0]
    classes = ", ".join(f"{c} {klass.get(c, 0)}" for c in CLASSES)
    return (
        f"{used}/{capacity} GPUs running; per team min {values[0]}, median"
        f" {statistics.median(values):.0f}, max {values[-1]}; per class {classes}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=15000)
    parser.add_argument("--teams", type=int, default=30)
    parser.add_argument("--nodes", type=int, default=64, help="H100 nodes of 8 GPUs")
    parser.add_argument("--guarantee", type=int, default=16, help="GPUs guaranteed per team")
    parser.add_argument("--limit", type=int, default=48, help="GPUs a team may hold borrowing")
    parser.add_argument("--run-seconds", type=int, default=30)
    parser.add_argument("--only", choices=("gpupaas", "kueue"))
    parser.add_argument(
        "--web-processes", type=int, default=2, help="gpupaas web workers sharing the submitters"
    )
    parser.add_argument("--kueue-version", default=KUEUE_VERSION)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupaas.settings.test")
    os.environ["DATABASE_URL"] = f"postgres://gpupaas:gpupaas@127.0.0.1:5432/{DB_NAME}"
    os.environ.setdefault("ORCHESTRATION_RECONCILE_CONCURRENCY", "8")
    recreate_database(DB_NAME)
    import django

    django.setup()
    jobs = make_jobs(args.jobs, args.teams)
    shapes = Counter(j.gpus for j in jobs)
    print(
        f"{args.jobs} Jobs ({', '.join(f'{shapes[g]} x {g} GPU' for g, _ in SHAPES)}),"
        f" {args.teams} teams (guarantee {args.guarantee}, limit {args.limit} GPUs),"
        f" {args.nodes} nodes x 8 H100, pods run {args.run_seconds} s",
        flush=True,
    )
    runs: list[Run] = []
    errors: dict[str, str] = {}
    for system in ("gpupaas", "kueue"):
        if args.only and args.only != system:
            continue
        t0 = time.time()
        try:
            if system == "gpupaas":
                runs.append(
                    with_cluster(args.nodes, lambda c, _w, m: run_gpupaas(args, jobs, c, m))
                )
            else:
                runs.append(
                    with_cluster(args.nodes, lambda c, w, m: run_kueue(args, jobs, c, w, m))
                )
        except Exception as exc:
            errors[system] = f"{type(exc).__name__}: {exc}"
        print(f"{system}: {time.time() - t0:.0f} s", flush=True)
        if runs and runs[-1].system == system:  # its figures now, in case a later side fails
            print(json.dumps({"report": runs[-1].report()}, default=str), flush=True)
            print(
                f"{system} CPU seconds (the run's own processes): "
                + ", ".join(f"{k} {v:.0f}" for k, v in sorted(runs[-1].cpu.items())),
                flush=True,
            )
            requests = runs[-1].requests
            print(
                f"{system} API server requests: {sum(requests.values())}"
                f" ({sum(requests.values()) / max(1, len(runs[-1].submitted)):.1f} per Job; "
                + ", ".join(f"{verb} {n}" for verb, n in requests.most_common())
                + ")",
                flush=True,
            )

    capacity = args.nodes * 8
    print("\n| system | submitted | submit/s | admitted | admissions/s | submit→admitted p50 / p99"
          " | submit→running p50 / p99 | running | GPUs busy |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    reports = [r.report() for r in runs]
    for r in reports:
        print(
            f"| {r['system']} | {r['submitted']} | {r['submit_rate']:.1f} | {r['admitted']}"
            f" | {r['adm_rate']:.1f} | {r['adm_p50']:.2f} / {r['adm_p99']:.2f} s"
            f" | {r['run_p50']:.2f} / {r['run_p99']:.2f} s | {r['running']} | {r['busy']:.0%} |"
        )
    for run in runs:
        print(f"{run.system} allocation when the last Job was submitted: "
              f"{describe_allocation(run, capacity)}")  # fmt: skip
        for note in Counter(n.split(":")[0].split(" ")[0] for n in run.notes).items():
            print(f"  notes: {note}")
        for note in run.notes[:5]:
            print(f"    {note[:300]}")
        for name, values in [*run.stages.items(), *run.loops.items()]:
            if values:
                print(
                    f"  {name}: n {len(values)}, p50 {statistics.median(values):.2f} s,"
                    f" p90 {pct(values, 0.9):.2f} s, max {max(values):.2f} s"
                )
    if len(reports) == 2:
        ours, theirs = reports
        print(
            f"\ngpupaas ÷ Kueue: admissions/s {ours['adm_rate'] / theirs['adm_rate']:.2f}x;"
            f" submit→running p50 {theirs['run_p50'] / ours['run_p50']:.2f}x faster,"
            f" p99 {theirs['run_p99'] / ours['run_p99']:.2f}x faster"
        )
    for system, error in errors.items():
        print(f"\n{system} could not run: {error}")
    print(json.dumps({"reports": reports, "errors": errors}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
