"""A sweep recorded as trials: one unit per point, its own state derived from theirs, its cap
checked at submit, cancelled with its trials, listed once, its trials shown at both doors."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from rest_framework.test import APIClient

from apps.orchestration.archive import metrics_line
from apps.orchestration.models import WorkloadLogArchive
from apps.orchestration.selectors import sweep_trials
from apps.scheduling.selectors import scheduling_snapshot
from apps.workloads import core
from apps.workloads.models import Workload
from apps.workloads.selectors import WorkloadFilters, quota_usage_for_teams, workloads_filtered
from apps.workloads.services import workload_cancel, workload_transition
from tests.plugins.cast import Cast
from tests.workloads.submitting import submit_fields

pytestmark = pytest.mark.django_db

GRID = {"lr": ["0.1", "0.01", "0.001"], "bs": ["32", "64"]}


def submit_sweep(cast: Cast, **kw: object) -> Workload:
    args: dict = {
        "actor": cast.owner,
        "team": cast.team,
        "kind": core.KIND_SWEEP,
        "name": "lr-sweep",
        "gpu_class": cast.gpu_class,
        "image": cast.image,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
        "grid": GRID,
        "params": {"pod_annotations": {"kubesim.io/run-duration": "1s"}},
    }
    args.update(kw)
    return submit_fields(**args)


def move(trial: Workload, *states: str) -> None:
    for state in states:
        assert workload_transition(workload=trial, to_state=state, reason=f"to {state}")


def test_a_sweep_is_recorded_with_one_trial_per_point(cast: Cast) -> None:
    sweep = submit_sweep(cast, parallelism=2)
    assert (sweep.replicas, sweep.params["parallelism"], sweep.sweep_id) == (6, 2, None)
    trials = list(sweep.trials.order_by("trial_index"))
    assert [t.trial_index for t in trials] == list(range(6))
    assert [t.params["point"] for t in trials] == core.sweep_points(GRID)
    assert trials[0].params["grid"] == {"bs": ["32"], "lr": ["0.1"]}
    assert trials[0].params["pod_annotations"] == {"kubesim.io/run-duration": "1s"}
    assert {(t.replicas, t.charged_milli, t.state, t.priority_class) for t in trials} == {
        (1, 1000, core.PENDING, core.PRIORITY_BATCH)
    }
    assert trials[5].name == "lr-sweep #5"


def test_the_default_parallelism_is_four_or_the_trials(cast: Cast) -> None:
    assert submit_sweep(cast).params["parallelism"] == 4
    assert submit_sweep(cast, grid={"lr": ["1", "2"]}).params["parallelism"] == 2


@pytest.mark.parametrize(
    ("parallelism", "words"),
    [(7, "The sweep has 6 trials; at most 6"), (0, "a whole number, at least 1")],
)
def test_a_sweep_above_its_cap_is_refused_with_a_field_message(
    cast: Cast, parallelism: int, words: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit_sweep(cast, parallelism=parallelism)
    assert words in refused.value.message_dict["parallelism"][0]
    assert not Workload.objects.exists()


def test_what_runs_at_once_must_fit_the_team_limit(cast: Cast) -> None:
    quota = cast.team.quotas.get()
    quota.guaranteed_milli, quota.limit_milli = 1000, 2000
    quota.save()
    with pytest.raises(ValidationError) as refused:
        submit_sweep(cast, parallelism=3)
    assert "3 trials at once" in refused.value.message_dict["parallelism"][0]
    assert submit_sweep(cast, parallelism=2).trials.count() == 6


def test_the_sweep_state_follows_its_trials(cast: Cast) -> None:
    sweep = submit_sweep(cast, grid={"lr": ["1", "2", "3"]})
    a, b, c = sweep.trials.order_by("trial_index")
    move(a, core.QUEUED)
    sweep.refresh_from_db()
    assert sweep.state == core.QUEUED
    move(a, core.ADMITTED, core.RUNNING)
    sweep.refresh_from_db()
    assert sweep.state == core.RUNNING and sweep.started_at is not None
    assert sweep.last_reason == "1 of 3 trials running, 0 done, 2 waiting."
    move(a, core.SUCCEEDED)
    move(b, core.QUEUED, core.ADMITTED, core.RUNNING, core.FAILED)
    move(c, core.QUEUED, core.ADMITTED, core.RUNNING, core.SUCCEEDED)
    sweep.refresh_from_db()
    assert sweep.state == core.FAILED and sweep.finished_at is not None
    assert sweep.last_reason == "1 of 3 trials failed; 2 succeeded."


def test_cancelling_a_sweep_cancels_its_unfinished_trials(cast: Cast) -> None:
    sweep = submit_sweep(cast, grid={"lr": ["1", "2"]})
    done, live = sweep.trials.order_by("trial_index")
    move(done, core.QUEUED, core.ADMITTED, core.RUNNING, core.SUCCEEDED)
    move(live, core.QUEUED, core.ADMITTED)
    workload_cancel(actor=cast.owner, workload=sweep)
    assert dict(sweep.trials.values_list("trial_index", "state")) == {
        0: core.SUCCEEDED,
        1: core.CANCELLED,
    }
    sweep.refresh_from_db()
    assert sweep.state == core.CANCELLED


def test_only_trials_are_scheduled_and_charged_and_only_the_sweep_is_listed(cast: Cast) -> None:
    sweep = submit_sweep(cast, parallelism=2)
    first = sweep.trials.get(trial_index=0)
    move(first, core.QUEUED, core.ADMITTED)
    snapshot = scheduling_snapshot(now=first.created_at, half_life_seconds=3600)
    assert sweep.pk not in {w.id for w in snapshot.waiting}
    assert {w.sweep for w in snapshot.waiting} == {sweep.pk}
    assert len(snapshot.waiting) == 5
    assert [r.id for r in snapshot.running] == [first.pk]
    assert snapshot.parallelism == {sweep.pk: 2}
    (usage,) = quota_usage_for_teams([cast.team])
    assert usage.used_milli == 1000  # one running trial, not the sweep's six points
    listed = workloads_filtered(cast.owner, WorkloadFilters())
    assert [w.pk for w in listed] == [sweep.pk]


def test_the_trials_endpoint_shows_every_trial_and_the_sweeps_state(cast: Cast) -> None:
    sweep = submit_sweep(cast, grid={"lr": ["1", "2"]})
    done = sweep.trials.get(trial_index=0)
    move(done, core.QUEUED, core.ADMITTED, core.RUNNING)
    assert workload_transition(
        workload=done, to_state=core.SUCCEEDED, reason="completed", extra={"exit_code": 0}
    )
    WorkloadLogArchive.objects.create(
        workload=done,
        replica=0,
        attempt=1,
        pod_name="p",
        pod_uid="u",
        container="main",
        text="2026-01-01T00:00:00Z epoch 1\n2026-01-01T00:00:01Z loss=0.3 acc=0.9\n"
        "2026-01-01T00:00:02Z done\n",
    )
    api = APIClient()
    api.force_authenticate(cast.owner)
    body = api.get(f"/api/v1/workloads/{sweep.pk}/trials/").json()
    assert body["sweep"]["state"] == core.RUNNING
    assert body["parallelism"] == 2
    assert body["counts"] == {core.SUCCEEDED: 1, core.PENDING: 1}
    first, second = body["trials"]
    assert (first["index"], first["params"], first["state"], first["exit_code"]) == (
        0,
        {"lr": "1"},
        core.SUCCEEDED,
        0,
    )
    assert first["last_metrics_line"] == "loss=0.3 acc=0.9"
    assert first["attempts"] == 1 and first["runtime_seconds"] is not None
    assert (second["state"], second["exit_code"], second["last_metrics_line"]) == (
        core.PENDING,
        None,
        None,
    )
    assert api.get(f"/api/v1/workloads/{done.pk}/trials/").status_code == 404

    outsider = APIClient()
    outsider.force_authenticate(cast.outsider)
    assert outsider.get(f"/api/v1/workloads/{sweep.pk}/trials/").status_code == 404


def test_the_sweep_page_lists_its_trials_and_a_trial_links_back(cast: Cast) -> None:
    sweep = submit_sweep(cast, grid={"lr": ["1", "2"]})
    portal = Client()
    portal.force_login(cast.owner)
    page = portal.get(f"/workloads/{sweep.pk}/").content.decode()
    assert 'id="trials"' in page and "lr=1" in page and "lr=2" in page
    assert "at most 2 at once" in page
    trial = sweep.trials.get(trial_index=1)
    page = portal.get(f"/workloads/{trial.pk}/").content.decode()
    assert f'href="/workloads/{sweep.pk}/"' in page
    assert portal.get(f"/workloads/{sweep.pk}/").status_code == 200
    outsider = Client()
    outsider.force_login(cast.outsider)
    assert outsider.get(f"/workloads/{sweep.pk}/").status_code == 404


def test_trial_rows_come_in_grid_order(cast: Cast) -> None:
    sweep = submit_sweep(cast)
    assert [r.params for r in sweep_trials(sweep)] == core.sweep_points(GRID)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            ["2026-01-01T00:00:00.5Z step 1", '2026-01-01T00:00:01Z {"loss": 0.1}', "bye"],
            '{"loss": 0.1}',
        ),
        (["loss=0.2, acc=0.8", "saving checkpoint"], "loss=0.2, acc=0.8"),
        (["{not json}", "x = 1"], None),
        ([], None),
    ],
)
def test_the_last_metrics_line_is_json_or_key_value_pairs(
    lines: list[str], expected: str | None
) -> None:
    assert metrics_line(lines) == expected


def test_sweep_state_from_trial_states() -> None:
    assert core.sweep_state([core.PENDING, core.QUEUED]) == (
        core.QUEUED,
        "2 trials waiting for GPUs.",
    )
    assert core.sweep_state([core.SUCCEEDED, core.QUEUED])[0] == core.RUNNING
    assert core.sweep_state([core.SUCCEEDED, core.SUCCEEDED]) == (
        core.SUCCEEDED,
        "All 2 trials succeeded.",
    )
    assert core.sweep_state([core.SUCCEEDED, core.CANCELLED])[0] == core.CANCELLED
    assert core.sweep_state([core.EXPIRED, core.CANCELLED])[0] == core.FAILED


# --- random samples of ranges -----------------------------------------------------------------

RANGES = {"lr": [1e-5, 1e-3, "log"], "bs": [16, 64, "int"], "dropout": [0.0, 0.5]}


def test_sampled_points_are_reproducible_and_within_their_ranges() -> None:
    points = core.sample_points(RANGES, 50, seed=7)
    assert points == core.sample_points(RANGES, 50, seed=7)
    assert points != core.sample_points(RANGES, 50, seed=8)
    for p in points:
        assert 1e-5 <= float(p["lr"]) <= 1e-3
        assert p["bs"].isdigit() and 16 <= int(p["bs"]) <= 64
        assert 0.0 <= float(p["dropout"]) <= 0.5
    # The log scale spreads points over the decades, not into the top one.
    assert any(float(p["lr"]) < 1e-4 for p in points)


def test_a_sampled_sweep_records_its_seed_and_one_trial_per_sample(cast: Cast) -> None:
    sweep = submit_sweep(cast, grid=None, ranges=RANGES, samples=5)
    seed = sweep.params["seed"]
    assert isinstance(seed, int)
    assert (sweep.replicas, sweep.params["samples"], sweep.params["parallelism"]) == (5, 5, 4)
    trials = list(sweep.trials.order_by("trial_index"))
    assert [t.params["point"] for t in trials] == core.sample_points(RANGES, 5, seed)
    from apps.workloads.services import workload_clone

    copy = workload_clone(actor=cast.owner, workload=sweep)
    assert [t.params["point"] for t in copy.trials.order_by("trial_index")] == [
        t.params["point"] for t in trials
    ]


@pytest.mark.parametrize(
    ("kw", "field", "words"),
    [
        ({"ranges": RANGES, "samples": 3}, "grid", "either a grid or ranges"),
        ({"grid": None, "ranges": RANGES}, "samples", "how many points"),
        ({"grid": None, "ranges": RANGES, "samples": 257}, "samples", "from 1 to 256"),
        ({"grid": None, "ranges": {"lr": [0, 1, "log"]}, "samples": 2}, "ranges", "above 0"),
        ({"grid": None, "ranges": {"lr": [2, 1]}, "samples": 2}, "ranges", "below its high"),
        ({"grid": None, "ranges": {"lr": [1, 2, "cubic"]}, "samples": 2}, "ranges", "scale"),
        ({"grid": None, "ranges": {"1lr": [1, 2]}, "samples": 2}, "ranges", "cannot name"),
        ({"grid": None, "ranges": RANGES, "samples": 2, "seed": -1}, "seed", "0 to"),
        ({"grid": None, "ranges": RANGES, "samples": 2, "parallelism": 3}, "parallelism", "2"),
    ],
)
def test_bad_ranges_are_refused_with_a_field_message(
    cast: Cast, kw: dict, field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        submit_sweep(cast, **kw)
    assert words in refused.value.message_dict[field][0], refused.value.message_dict
    assert not Workload.objects.exists()


def test_the_api_takes_ranges_samples_and_a_seed(cast: Cast) -> None:
    api = APIClient()
    api.force_authenticate(cast.owner)
    body = {
        "kind": "sweep",
        "name": "random",
        "team": cast.team.slug,
        "gpu_class": cast.gpu_class.name,
        "image": cast.image.name,
        "gpu_milli": 1000,
        "command": ["python", "train.py"],
        "ranges": RANGES,
        "samples": 6,
        "seed": 42,
        "parallelism": 2,
    }
    created = api.post("/api/v1/workloads/", body, format="json")
    assert created.status_code == 201, created.json()
    trials = api.get(f"/api/v1/workloads/{created.json()['id']}/trials/").json()["trials"]
    assert [t["params"] for t in trials] == core.sample_points(RANGES, 6, 42)
    refused = api.post("/api/v1/workloads/", {**body, "samples": 0}, format="json")
    assert refused.status_code == 400
    assert "samples" in refused.json()["fields"]


def test_the_portal_form_takes_ranges_samples_and_parallelism(cast: Cast) -> None:
    portal = Client()
    portal.force_login(cast.owner)
    fields = {
        "action": "submit",
        "name": "random",
        "team": str(cast.team.pk),
        "gpu_class": str(cast.gpu_class.pk),
        "image": str(cast.image.pk),
        "gpu_milli": "1000",
        "command": "python train.py",
        "ranges": "lr=0.00001..0.001 log\nbs=16..64 int",
        "samples": "3",
        "seed": "5",
        "parallelism": "2",
    }
    created = portal.post("/workloads/new/sweep/", fields)
    assert created.status_code == 302, created.context["form"].errors
    sweep = Workload.objects.get(sweep__isnull=True)
    assert sweep.params["ranges"] == {"lr": [1e-05, 0.001, "log"], "bs": [16, 64, "int"]}
    assert (sweep.params["samples"], sweep.params["seed"], sweep.params["parallelism"]) == (3, 5, 2)
    assert sweep.trials.count() == 3
    refused = portal.post("/workloads/new/sweep/", {**fields, "ranges": "lr=1..x"})
    assert refused.status_code == 400
    assert "ranges" in refused.context["form"].errors
