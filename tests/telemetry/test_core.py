"""The pure telemetry rules, on plain data and on a real dcgm-exporter scrape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from apps.telemetry import core

REPO_ROOT = Path(__file__).resolve().parents[2]
T4_SCRAPE = REPO_ROOT.parent / "shared" / "data" / "dcgm" / "t4-scrape.prom"
T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def labels(**extra: str) -> dict[str, str]:
    base = {
        "gpu": "0",
        "UUID": "GPU-aaaa",
        "device": "nvidia0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "h100-0",
        "DCGM_FI_DRIVER_VERSION": "570.133.20",
    }
    base.update(extra)
    return base


def sample(name: str, value: float, **extra: str) -> core.Sample:
    return core.Sample(name, labels(**extra), value)


@pytest.fixture(scope="module")
def t4_samples() -> list[core.Sample]:
    if not T4_SCRAPE.exists():
        pytest.fail(f"the dcgm-exporter fixture is missing: {T4_SCRAPE}")
    return core.parse_exposition(T4_SCRAPE.read_text())


def test_real_scrape_parses_into_one_t4_reading(t4_samples: list[core.Sample]) -> None:
    readings = core.readings_from_samples(t4_samples)
    assert len(readings) == 1
    reading = readings[0]
    assert reading.series.uuid == "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"
    assert reading.series.hostname == "424773df46e0"
    assert reading.series.model == "Tesla T4"
    assert reading.series.driver == "460.106.00"
    assert reading.series.pod == "" and not reading.series.is_mig
    assert reading.get(core.FB_FREE) == 15109
    assert reading.utilisation == 0.0


def test_real_scrape_gives_a_healthy_t4_node_with_its_memory(
    t4_samples: list[core.Sample],
) -> None:
    nodes = core.node_health_from_samples(t4_samples)
    node = core.health_verdict(nodes["424773df46e0"], expected_gpus=1)
    assert node.verdict == "ok", node.problems
    (gpu,) = node.gpus
    assert (gpu.model, gpu.memory_mib, gpu.temperature_c) == ("Tesla T4", 15109, 25)
    assert node.driver_version == "460.106.00"


def test_real_scrape_with_pod_not_in_kubernetes_mode_credits_nobody(
    t4_samples: list[core.Sample],
) -> None:
    readings = core.readings_from_samples(t4_samples)
    pods = {("", ""): core.PodAllocation(1, 1.0)}
    assert core.measure_workloads(readings, pods) == {}


def test_exported_pod_labels_win_over_the_exporters_own_pod() -> None:
    identity = core.series_identity(
        labels(
            namespace="gpu-operator",
            pod="nvidia-dcgm-exporter-x7",
            exported_namespace="team-vision",
            exported_pod="wl-7-0",
            exported_container="notebook",
        )
    )
    assert identity.pod_key == ("team-vision", "wl-7-0")
    assert identity.container == "notebook"


def test_empty_exported_pod_means_no_pod_even_if_the_exporter_has_one() -> None:
    identity = core.series_identity(
        labels(namespace="gpu-operator", pod="nvidia-dcgm-exporter-x7", exported_pod="")
    )
    assert identity.pod == ""


def test_lowercase_hostname_of_newer_exporters_is_read() -> None:
    raw = labels()
    del raw["Hostname"]
    raw["hostname"] = "node-9"
    assert core.series_identity(raw).hostname == "node-9"


def test_mig_instance_is_measured_by_engine_activity_not_gpu_util() -> None:
    readings = core.readings_from_samples(
        [
            sample(core.GPU_UTIL, 0, GPU_I_ID="7", GPU_I_PROFILE="1g.10gb", pod="p", namespace="n"),
            sample(
                core.GR_ENGINE_ACTIVE,
                0.8,
                GPU_I_ID="7",
                GPU_I_PROFILE="1g.10gb",
                pod="p",
                namespace="n",
            ),
        ]
    )
    assert readings[0].utilisation == pytest.approx(0.8)
    measures = core.measure_workloads(readings, {("n", "p"): core.PodAllocation(5, 0.125)})
    assert measures[5].allocated_gpus == pytest.approx(0.125)
    assert measures[5].utilisation == pytest.approx(0.8)


def test_two_mig_instances_of_one_gpu_are_separate_devices() -> None:
    readings = core.readings_from_samples(
        [
            sample(core.GR_ENGINE_ACTIVE, 0.9, GPU_I_ID="1", pod="a", namespace="team-a"),
            sample(core.GR_ENGINE_ACTIVE, 0.0, GPU_I_ID="2", pod="b", namespace="team-b"),
        ]
    )
    pods = {
        ("team-a", "a"): core.PodAllocation(1, 0.5),
        ("team-b", "b"): core.PodAllocation(2, 0.25),
    }
    measures = core.measure_workloads(readings, pods)
    assert measures[1].utilisation == pytest.approx(0.9)
    assert measures[2].utilisation == 0.0


def test_device_level_values_on_a_shared_gpu_are_split_by_allocation() -> None:
    # dcgm-exporter repeats the device value (60 %) on both pods' series.
    readings = core.readings_from_samples(
        [
            sample(core.GPU_UTIL, 60, pod="a", namespace="team-a"),
            sample(core.GPU_UTIL, 60, pod="b", namespace="team-b"),
        ]
    )
    pods = {
        ("team-a", "a"): core.PodAllocation(1, 0.5),
        ("team-b", "b"): core.PodAllocation(2, 0.25),
    }
    measures = core.measure_workloads(readings, pods)
    # 60 % of the GPU, shared 2:1 as allocated; neither is credited beyond its allocation.
    assert measures[1].used_gpus == pytest.approx(0.4)
    assert measures[2].used_gpus == pytest.approx(0.2)
    assert measures[1].utilisation == pytest.approx(0.8)


def test_per_pod_values_on_a_shared_gpu_credit_each_pod_its_own_use() -> None:
    readings = core.readings_from_samples(
        [
            sample(core.GPU_UTIL, 24, pod="a", namespace="team-a", accounting="pod"),
            sample(core.GPU_UTIL, 0.5, pod="b", namespace="team-b", accounting="pod"),
        ]
    )
    pods = {
        ("team-a", "a"): core.PodAllocation(1, 0.25),
        ("team-b", "b"): core.PodAllocation(2, 0.25),
    }
    measures = core.measure_workloads(readings, pods)
    assert measures[1].utilisation == pytest.approx(0.96)
    assert measures[2].utilisation == pytest.approx(0.02)


def test_a_pod_of_another_team_with_the_same_name_is_not_credited() -> None:
    readings = core.readings_from_samples(
        [sample(core.GPU_UTIL, 90, pod="wl-3-0", namespace="team-b")]
    )
    # Workload 3 belongs to team-a: only its own namespace is in the index.
    measures = core.measure_workloads(readings, {("team-a", "wl-3-0"): core.PodAllocation(3, 1)})
    assert measures == {}


def test_a_pod_on_two_whole_gpus_averages_them() -> None:
    readings = core.readings_from_samples(
        [
            sample(core.GPU_UTIL, 100, pod="p", namespace="n"),
            sample(core.GPU_UTIL, 0, pod="p", namespace="n", gpu="1", UUID="GPU-bbbb"),
        ]
    )
    measures = core.measure_workloads(readings, {("n", "p"): core.PodAllocation(9, 2)})
    assert measures[9].allocated_gpus == pytest.approx(2)
    assert measures[9].utilisation == pytest.approx(0.5)


def test_overlap_counts_only_the_time_inside_the_window() -> None:
    start, end = T0, T0 + timedelta(minutes=1)
    assert core.overlap_seconds(T0 - timedelta(hours=1), None, start, end) == 60
    assert core.overlap_seconds(T0 + timedelta(seconds=45), None, start, end) == 15
    assert (
        core.overlap_seconds(T0 - timedelta(hours=1), T0 + timedelta(seconds=10), start, end) == 10
    )
    assert core.overlap_seconds(None, None, start, end) == 0


def test_price_is_gpu_hours_times_hourly_cost() -> None:
    assert core.price(5400, Decimal("4.5")) == Decimal("6.7500")


POLICY = core.IdlePolicy(
    enabled=True,
    threshold=0.05,
    warn_after=timedelta(minutes=20),
    suspend_after=timedelta(minutes=30),
    flag_after=timedelta(hours=1),
)


def decide(kind: str, util: float | None, state: core.IdleState, minutes: int) -> core.IdleDecision:
    now = T0 + timedelta(minutes=minutes)
    return core.idle_decide(
        kind=kind,
        utilisation=util,
        policy=POLICY,
        state=state,
        window_start=now - timedelta(minutes=1),
        now=now,
    )


def test_idle_notebook_is_warned_then_suspended() -> None:
    state = core.IdleState(idle_since=T0)
    assert not decide("notebook", 0.01, state, 10).warn
    warned = decide("notebook", 0.01, state, 20)
    assert warned.warn and not warned.suspend
    state = core.IdleState(idle_since=T0, warned_at=T0 + timedelta(minutes=20))
    assert not decide("notebook", 0.01, state, 25).suspend
    assert decide("notebook", 0.01, state, 30).suspend


def test_notebook_idle_past_both_limits_is_warned_before_it_is_suspended() -> None:
    decision = decide("notebook", 0.0, core.IdleState(idle_since=T0), 90)
    assert decision.warn and not decision.suspend


def test_busy_notebook_is_never_culled_and_ends_the_streak() -> None:
    state = core.IdleState(idle_since=T0, warned_at=T0 + timedelta(minutes=20))
    decision = decide("notebook", 0.95, state, 120)
    assert not decision.suspend and not decision.warn
    assert decision.idle_since is None and decision.busy_again


def test_missing_measurement_never_culls() -> None:
    state = core.IdleState(idle_since=T0, warned_at=T0 + timedelta(minutes=20))
    decision = decide("notebook", None, state, 120)
    assert not decision.suspend and decision.idle_since is None


def test_idle_training_job_is_flagged_once() -> None:
    assert decide("training", 0.0, core.IdleState(idle_since=T0), 60).flag
    flagged = core.IdleState(idle_since=T0, flagged_at=T0 + timedelta(minutes=60))
    assert not decide("training", 0.0, flagged, 90).flag


def test_inference_endpoints_are_never_acted_on() -> None:
    decision = decide("inference", 0.0, core.IdleState(idle_since=T0), 600)
    assert not (decision.warn or decision.suspend or decision.flag)


def test_jupyter_activity_in_the_window_keeps_a_notebook_with_an_idle_gpu_in_use() -> None:
    now = T0 + timedelta(minutes=40)
    window_start = now - timedelta(minutes=1)
    state = core.IdleState(idle_since=T0, warned_at=T0 + timedelta(minutes=20))

    def with_activity(kind: str, activity_at: datetime | None) -> core.IdleDecision:
        return core.idle_decide(
            kind=kind,
            utilisation=0.0,
            policy=POLICY,
            state=state,
            window_start=window_start,
            now=now,
            activity_at=activity_at,
        )

    # A cell run (or a file saved) half a minute ago: in use, the warning's streak ends.
    used = with_activity("notebook", now - timedelta(seconds=30))
    assert used.idle_since is None and used.busy_again and not used.suspend
    # Jupyter quiet since before the window: the GPU decides, as without Jupyter.
    quiet = with_activity("notebook", window_start - timedelta(seconds=1))
    assert quiet.idle_since == T0 and quiet.suspend
    assert with_activity("notebook", None).suspend
    # Only a notebook's Jupyter counts; a training job is flagged on its GPU alone.
    flagged = core.idle_decide(
        kind="training",
        utilisation=0.0,
        policy=POLICY,
        state=core.IdleState(idle_since=T0 - POLICY.flag_after),
        window_start=window_start,
        now=now,
        activity_at=now,
    )
    assert flagged.flag


def test_disabled_policy_measures_but_does_nothing() -> None:
    now = T0 + timedelta(hours=5)
    decision = core.idle_decide(
        kind="notebook",
        utilisation=0.0,
        policy=core.IdlePolicy(
            False, 0.05, POLICY.warn_after, POLICY.suspend_after, POLICY.flag_after
        ),
        state=core.IdleState(idle_since=T0),
        window_start=now - timedelta(minutes=1),
        now=now,
    )
    assert decision.idle_since == T0 and not decision.warn


def test_node_with_double_bit_ecc_or_critical_xid_fails_acceptance() -> None:
    samples = [
        sample(core.GPU_TEMP, 40),
        sample(core.ECC_DBE_TOTAL, 2),
        sample(core.GPU_TEMP, 41, gpu="1", UUID="GPU-bbbb"),
        sample(core.XID_ERRORS, 79, gpu="1", UUID="GPU-bbbb"),
    ]
    node = core.health_verdict(core.node_health_from_samples(samples)["h100-0"], expected_gpus=2)
    assert node.verdict == "failed"
    assert any("uncorrectable ECC" in p for p in node.problems)
    assert any("XID 79" in p for p in node.problems)


def test_node_with_fewer_gpus_than_the_inventory_fails_acceptance() -> None:
    node = core.node_health_from_samples([sample(core.GPU_TEMP, 40)])["h100-0"]
    assert core.health_verdict(node, expected_gpus=8).verdict == "failed"


def test_hot_gpu_is_a_warning() -> None:
    node = core.node_health_from_samples([sample(core.GPU_TEMP, 85)])["h100-0"]
    assert core.health_verdict(node).verdict == "warning"


def test_mig_gpu_memory_is_the_sum_of_its_instances() -> None:
    samples = [
        sample(core.FB_USED, 1000, GPU_I_ID="1", pod="a", namespace="n"),
        sample(core.FB_FREE, 39000, GPU_I_ID="1", pod="a", namespace="n"),
        sample(core.FB_USED, 0, GPU_I_ID="2"),
        sample(core.FB_FREE, 40000, GPU_I_ID="2"),
    ]
    assert core.node_health_from_samples(samples)["h100-0"].gpus[0].memory_mib == 80000


def test_accounting_queries_average_over_the_window_and_keep_the_join_labels() -> None:
    queries = core.accounting_queries(60)
    assert set(queries) == {core.GPU_UTIL, core.GR_ENGINE_ACTIVE}
    query = queries[core.GPU_UTIL]
    assert query.endswith("(avg_over_time(DCGM_FI_DEV_GPU_UTIL[60s]))")
    for label in ("exported_pod", "exported_namespace", "pod", "namespace", "GPU_I_ID", "hostname"):
        assert label in query


def test_a_workloads_own_idle_timeout_replaces_the_policys() -> None:
    from datetime import timedelta as td

    from apps.telemetry.core import IdlePolicy, with_idle_timeout

    base = IdlePolicy(
        enabled=True,
        threshold=0.05,
        warn_after=td(minutes=20),
        suspend_after=td(minutes=30),
        flag_after=td(hours=1),
    )
    notebook = with_idle_timeout(base, kind="notebook", timeout_seconds=10 * 60)
    assert (notebook.warn_after, notebook.suspend_after) == (td(minutes=10), td(minutes=10))
    longer = with_idle_timeout(base, kind="notebook", timeout_seconds=2 * 3600)
    assert (longer.warn_after, longer.suspend_after) == (td(minutes=20), td(hours=2))
    job = with_idle_timeout(base, kind="training", timeout_seconds=900)
    assert job.flag_after == td(minutes=15) and job.suspend_after == base.suspend_after
    assert with_idle_timeout(base, kind="notebook", timeout_seconds=None) == base
    assert with_idle_timeout(base, kind="inference", timeout_seconds=60) == base
