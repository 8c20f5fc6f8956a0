"""A team's policy on plain data: what it refuses, and the message that names it."""

from __future__ import annotations

from apps.policies.core import (
    PolicySpec,
    duration,
    idle_timeout_default,
    policy_errors,
    policy_problems,
    runtime_default,
)

POLICY = PolicySpec(
    team="Contractors",
    allowed_classes=frozenset({"L40S-48GB"}),
    allowed_images=frozenset({"PyTorch training"}),
    max_gpu_milli_per_workload=2000,
    max_runtime_seconds={"training": 2 * 86400},
    default_idle_timeout_seconds={"notebook": 1800},
    exclusive_classes=frozenset({"L40S-48GB"}),
)


def ask(**kw: object) -> dict[str, str]:
    values: dict[str, object] = {
        "kind": "training",
        "gpu_class": "L40S-48GB",
        "sharing_mode": "timeslice",
        "image": "PyTorch training",
        "gpu_milli": 1000,
        "at_once_milli": 1000,
        "max_runtime_seconds": None,
    }
    values.update(kw)
    return policy_problems(POLICY, **values)  # type: ignore[arg-type]


def test_a_request_within_the_policy_passes() -> None:
    assert ask() == {}


def test_each_rule_names_the_policy_and_the_field() -> None:
    assert ask(gpu_class="H100-80GB", sharing_mode="whole") == {
        "gpu_class": "Contractors's team policy allows only these GPU classes: L40S-48GB; "
        "H100-80GB is not one of them."
    }
    assert "allows only these images: PyTorch training" in ask(image="Mine")["image"]
    assert ask(at_once_milli=4000, gpu_milli=2000)["gpu_milli"] == (
        "Contractors's team policy allows at most 2 GPU per workload; it would hold 4 GPU."
    )
    assert "its trials at once" in ask(kind="sweep", at_once_milli=3000)["gpu_milli"]
    assert ask(max_runtime_seconds=3 * 86400)["max_runtime_seconds"] == (
        "Contractors's team policy allows a training job to run at most 2 days; ask for 2 days "
        "or less."
    )
    assert "does not share L40S-48GB GPUs with other teams" in ask(gpu_milli=500)["gpu_milli"]


def test_unknown_shape_and_isolated_sharing_are_left_to_other_rules() -> None:
    assert ask(at_once_milli=None) == {}
    assert ask(gpu_milli=500, sharing_mode="mig") == {}  # MIG isolates tenants
    assert ask(kind="notebook", max_runtime_seconds=30 * 86400) == {}  # no cap for notebooks


def test_no_restriction_when_the_policy_is_empty() -> None:
    empty = PolicySpec(team="Free")
    assert (
        policy_problems(
            empty,
            kind="training",
            gpu_class="X",
            sharing_mode="hami",
            image="Y",
            gpu_milli=10,
            at_once_milli=64_000,
            max_runtime_seconds=30 * 86400,
        )
        == {}
    )


def test_defaults_fill_only_what_was_not_asked() -> None:
    assert runtime_default(POLICY, "training", None) == 2 * 86400
    assert runtime_default(POLICY, "training", 3600) == 3600
    assert runtime_default(POLICY, "notebook", None) is None
    assert runtime_default(None, "training", None) is None
    assert idle_timeout_default(POLICY, "notebook", None) == 1800
    assert idle_timeout_default(POLICY, "notebook", 600) == 600


def test_numbers_a_policy_cannot_hold() -> None:
    errors = policy_errors(
        max_gpu_milli_per_workload=0,
        max_runtime_seconds={"training": 30, "notebook": 3600},
        idle_timeout_seconds={"notebook": 60},
    )
    assert set(errors) == {
        "max_gpu_milli_per_workload",
        "max_runtime_training_seconds",
        "idle_timeout_notebook_seconds",
    }


def test_durations_read_as_people_write_them() -> None:
    assert [duration(s) for s in (86400, 7200, 5400, 61)] == ["1 day", "2 h", "90 min", "61 s"]
