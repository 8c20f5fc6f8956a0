"""gpupaas, one process per part as deployed: the web workers' submits, the scheduling worker,
the reconcile worker and the watch, and where a Job's time goes between them."""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bench.admission.jobs import PRODUCT, SUBMITTERS, CpuMeter, JobSpec, PodWatch, Run, wait_done


@dataclass
class Parts:
    """What the gpupaas processes share: the cluster, the teams, and the queues between them."""

    cluster_id: int
    team_ids: list[int]
    owner_ids: list[int]
    gpu_class_id: int
    image_id: int
    run_seconds: int
    stop: Any  # multiprocessing.Event: the run is over
    go: Any  # multiprocessing.Event: the benchmark's own watch is synced, submit
    admitted: Any  # multiprocessing.Queue of workload ids, cycle -> reconcile workers
    results: Any  # multiprocessing.Queue of (part, payload), each part -> the benchmark


def _part_scheduler(parts: Parts) -> None:
    """The scheduling worker: cycles back to back while they admit (as a busy worker runs one
    for every submit that arrived meanwhile), every 0.2 s otherwise."""
    from django.db import connection

    from apps.scheduling.services import scheduling_cycle_run

    seconds: list[float] = []
    profile = cProfile.Profile() if os.environ.get("ADMISSION_PROFILE") else None
    while not parts.stop.is_set():
        t0 = time.perf_counter()
        if profile is not None:
            profile.enable()
        result = scheduling_cycle_run()
        if profile is not None:
            profile.disable()
        seconds.append(time.perf_counter() - t0)
        for pk in result.admitted:
            parts.admitted.put(pk)
        if not result.admitted:
            parts.stop.wait(0.2)
    connection.close()
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(35)
    parts.results.put(("cycle", seconds))


def _part_reconcilers(parts: Parts) -> None:
    """The reconcile workers: ``workload_reconcile`` for each admitted workload, 8 at a time
    (8 Celery worker threads, each keeping its connection as a worker does)."""
    import queue as queues

    from django.db import connection

    from apps.orchestration import services

    notes: list[str] = []

    def reconcile(pk: int) -> None:
        try:
            services.workload_reconcile(workload_id=pk)
        except Exception as exc:  # a worker's task retries; the bench records it
            notes.append(f"reconcile {pk}: {exc}")
            connection.close()

    with ThreadPoolExecutor(8, thread_name_prefix="reconcile") as pool:
        while not parts.stop.is_set():
            try:
                pk = parts.admitted.get(timeout=0.2)
            except queues.Empty:
                continue
            pool.submit(reconcile, pk)
    parts.results.put(("notes", notes))


def _part_watch(parts: Parts) -> None:
    """``manage.py watch_clusters``: the watch loop turning pod and Job changes into states."""
    from django.db import connection

    from apps.catalog.models import Cluster
    from apps.orchestration.watch import ClusterWatch

    seconds: list[float] = []
    watch = ClusterWatch(Cluster.objects.get(pk=parts.cluster_id))
    watch.start()
    try:
        while not parts.stop.is_set():
            t0 = time.perf_counter()
            if watch.step(timeout=0.5).workloads:
                seconds.append(time.perf_counter() - t0)
    finally:
        watch.stop()
        connection.close()
    parts.results.put(("watch step", seconds))


def _part_submitter(parts: Parts, jobs: list[JobSpec], threads: int) -> None:
    """A web worker: ``workload_submit`` for its share of the Jobs, ``threads`` at a time."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from apps.accounts.models import Team
    from apps.catalog.models import GpuClass, Image
    from apps.workloads import core as wl
    from apps.workloads.request import WorkloadRequest
    from apps.workloads.services import workload_submit

    teams = Team.objects.in_bulk(parts.team_ids)
    owners = get_user_model().objects.in_bulk(parts.owner_ids)
    gpu_class = GpuClass.objects.get(pk=parts.gpu_class_id)
    image = Image.objects.get(pk=parts.image_id)
    annotations = {"kubesim.io/run-duration": f"{parts.run_seconds}s"}
    connection.close()
    done: list[tuple[str, float, int]] = []
    notes: list[str] = []

    def submit(spec: JobSpec) -> None:
        t0 = time.time()
        try:
            workload = workload_submit(
                actor=owners[parts.owner_ids[spec.team]],
                team=teams[parts.team_ids[spec.team]],
                gpu_class=gpu_class,
                image=image,
                request=WorkloadRequest.of(
                    kind=wl.KIND_TRAINING,
                    name=f"job-{spec.index}",
                    gpu_milli=spec.gpus * 1000,
                    priority_class=spec.priority,
                    command=["python", "train.py"],
                    params={"pod_annotations": annotations},
                ),
            )
        except Exception as exc:
            notes.append(f"submit {spec.index}: {exc}")
            connection.close()
            return
        done.append((str(workload.pk), t0, spec.index))

    parts.go.wait()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(submit, jobs))
    parts.results.put(("submitted", done))
    parts.results.put(("notes", notes))


def run_gpupaas(
    args: argparse.Namespace, jobs: list[JobSpec], kubesim: Any, meter: CpuMeter
) -> Run:
    """gpupaas as it is deployed: web workers (``--web-processes`` processes sharing the 8
    submitting threads), a scheduling worker, a reconcile worker with 8 threads and the
    watch, each a process of its own; the benchmark's own pod watch in this one."""
    import multiprocessing

    from django.core.management import call_command
    from django.db import connections

    from apps.catalog.models import Cluster, GpuClass, Image
    from apps.orchestration import services
    from apps.orchestration.clusters import forget_clients, kube_for
    from tests.factories import MembershipFactory, TeamFactory, TeamQuotaFactory, UserFactory

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0)
    run = Run("gpupaas", capacity=args.nodes * 8, run_seconds=args.run_seconds)
    cluster = Cluster.objects.create(name="bench", kubeconfig_path=str(kubesim.kubeconfig))
    services.cluster_inventory_sync(cluster=cluster)
    h100 = GpuClass.objects.get(product_label=PRODUCT, sharing_mode="whole")
    image = Image.objects.get(name="PyTorch training")
    teams, owners = [], []
    for t in range(args.teams):
        team = TeamFactory(name=f"Team {t}")
        TeamQuotaFactory(
            team=team,
            gpu_class=h100,
            guaranteed_milli=args.guarantee * 1000,
            limit_milli=args.limit * 1000,
        )
        owner = UserFactory(username=f"lead{t}")
        MembershipFactory(user=owner, team=team, role="lead")
        teams.append(team)
        owners.append(owner)
    for team in teams:
        services.team_namespace_ensure(team=team)
    # No connection, socket or thread crosses the fork below: each process opens its own.
    connections.close_all()
    forget_clients()
    gc.collect()
    context = multiprocessing.get_context("fork")
    parts = Parts(
        cluster_id=cluster.pk,
        team_ids=[t.pk for t in teams],
        owner_ids=[o.pk for o in owners],
        gpu_class_id=h100.pk,
        image_id=image.pk,
        run_seconds=args.run_seconds,
        stop=context.Event(),
        go=context.Event(),
        admitted=context.Queue(),
        results=context.Queue(),
    )
    web = max(1, args.web_processes)
    processes = [
        context.Process(target=_part_scheduler, args=(parts,), name="scheduler"),
        context.Process(target=_part_reconcilers, args=(parts,), name="reconcile"),
        context.Process(target=_part_watch, args=(parts,), name="watch"),
        *(
            context.Process(
                target=_part_submitter,
                args=(parts, jobs[i::web], max(1, SUBMITTERS // web)),
                name=f"web-{i}",
            )
            for i in range(web)
        ),
    ]
    for process in processes:
        process.start()
    view = PodWatch(kube_for(cluster), run)
    view.start()
    by_index = {spec.index: spec for spec in jobs}
    collected: dict[str, list[Any]] = {}
    expected = 3 + 2 * web  # cycle, notes, watch step; submitted and notes per web worker

    def take(count: int) -> None:
        for _ in range(count):
            part, payload = parts.results.get(timeout=3 * 3600)  # a lost part stops the run
            collected.setdefault(part, []).extend(payload)

    parts.go.set()
    take(2 * web)  # every web worker has submitted its share
    run.submit_done = time.time()
    for key, t0, index in collected.pop("submitted", []):
        spec = by_index[index]
        run.submitted[key] = t0
        run.klass[key], run.team[key], run.gpus[key] = spec.priority, spec.team, spec.gpus
    run.allocation = view.allocation()
    wait_done(run, len(run.submitted))
    run.cpu = meter.stop()
    parts.stop.set()
    take(expected - 2 * web)
    for process in processes:
        process.join(timeout=120)
    view.stop.set()
    run.notes.extend(collected.pop("notes", []))
    # Admitted as for Kueue: when the bench's own watch first sees the Job unsuspended on the
    # cluster (PodWatch); the portal's own admission events feed the stage breakdown only.
    run.loops = {name: collected.get(name, []) for name in ("cycle", "watch step")}
    run.stages = stage_breakdown(run, args.run_seconds)
    return run


def stage_breakdown(run: Run, run_seconds: int) -> dict[str, list[float]]:
    """Seconds per workload in each stage of gpupaas' pipeline, from its state events and
    the benchmark's own pod watch."""
    from apps.workloads.models import Workload, WorkloadEvent

    created = dict(Workload.objects.values_list("pk", "created_at"))
    first: dict[tuple[int, str], float] = {}
    for pk, state, at in WorkloadEvent.objects.order_by("created_at", "id").values_list(
        "workload_id", "to_state", "created_at"
    ):
        first.setdefault((pk, state), at.timestamp())
    stages: dict[str, list[float]] = {}

    def add(name: str, a: float | None, b: float | None) -> None:
        if a is not None and b is not None:
            stages.setdefault(name, []).append(b - a)

    for key, t_submit in run.submitted.items():
        pk = int(key)
        row = created[pk].timestamp() if pk in created else None
        admitted = first.get((pk, "admitted"))
        starting = first.get((pk, "starting"))
        pod_running = run.running.get(key)
        running = first.get((pk, "running"))
        done = first.get((pk, "succeeded"))
        add("submit → row", t_submit, row)
        add("row → admitted (queue + cycle)", row, admitted)
        add("admitted → Job created (reconcile)", admitted, starting)
        add("Job created → pod Running (cluster)", starting, pod_running)
        add("pod Running → state running (watch)", pod_running, running)
        add(
            "pod finished → state succeeded (watch)",
            pod_running + run_seconds if pod_running is not None else None,
            done,
        )
    # How long freed quota stays unused: from each workload's end to the next admission.
    ends = sorted(t for (_, state), t in first.items() if state == "succeeded")
    admits = sorted(t for (_, state), t in first.items() if state == "admitted")
    j = 0
    for end in ends:
        while j < len(admits) and admits[j] < end:
            j += 1
        if j < len(admits):
            stages.setdefault("succeeded → next admission", []).append(admits[j] - end)
    return stages
