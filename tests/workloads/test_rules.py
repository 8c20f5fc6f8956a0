"""The request rule set as plain data in, field → message out (no database)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from apps.scheduling.data import GpuClassSpec, NodeSpec, Quota
from apps.workloads import core, rules


class ImageSpec:
    def __init__(self, name: str = "PyTorch", kind: str = "any", enabled: bool = True) -> None:
        self.name, self.kind, self.enabled = name, kind, enabled


MIG = GpuClassSpec(
    name="A100-MIG",
    sharing_mode="mig",
    memory_mib=81920,
    mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"),
)
WHOLE = GpuClassSpec(name="H100", sharing_mode="whole", memory_mib=81559)


def context(**kw: Any) -> rules.Context:
    values: dict[str, Any] = {
        "team": "Vision",
        "leads": False,
        "gpu_class": WHOLE,
        "image": ImageSpec(),
        "quota": Quota("Vision", "H100", guaranteed_milli=4000, limit_milli=8000),
        "cpu_milli": 2000,
        "memory_mib": 8192,
    }
    values.update(kw)
    return rules.Context(**values)


JOB = rules.WorkloadRequest(kind="training", name="t", gpu_milli=1000, command=("python",))


def test_a_valid_job_has_no_problems_and_is_charged_replicas_times_amount() -> None:
    request = replace(JOB, gpu_milli=2000, replicas=2)
    assert rules.request_problems(request, context()) == {}
    charge = rules.charge_of(request, context().gpu_class)
    assert (charge.replicas, charge.total_milli, charge.priority_class) == (2, 4000, "training")


def test_a_sweep_is_charged_for_every_point_and_may_use_a_fraction_per_point() -> None:
    sweep = replace(
        JOB, kind="sweep", gpu_milli=125, grid={"lr": ["1", "2", "3"], "bs": ["8", "16"]}
    )
    assert rules.request_problems(sweep, context(gpu_class=MIG, quota=None)) == {
        "gpu_class": "Vision has no quota for A100-MIG; ask a platform admin for one."
    }
    assert rules.request_problems(sweep, context(gpu_class=MIG)) == {}
    # Each point gets a 1g.10gb instance: one of seven compute slices, 143 milli.
    assert rules.charge_of(sweep, MIG).total_milli == 6 * 143
    wrong = replace(sweep, replicas=1)
    assert rules.request_problems(wrong, context(gpu_class=MIG))["replicas"] == (
        "A sweep runs one replica per point of its grid (6 here); leave replicas out."
    )


@pytest.mark.parametrize(
    ("kind", "member", "lead"),
    [
        ("notebook", ("development", "batch"), core.PRIORITY_ORDER),
        ("training", ("training", "development", "batch"), core.PRIORITY_ORDER),
        ("sweep", ("batch",), core.PRIORITY_ORDER),
    ],
)
def test_members_use_their_kinds_class_or_lower_leads_any(
    kind: str, member: tuple[str, ...], lead: tuple[str, ...]
) -> None:
    assert core.allowed_priorities(kind, is_lead=False, is_admin=False) == member
    assert core.allowed_priorities(kind, is_lead=True, is_admin=False) == lead
    assert core.allowed_priorities(kind, is_lead=False, is_admin=True) == lead


def test_mig_takes_the_smallest_profile_that_holds_the_fraction_and_at_most_one_gpu() -> None:
    assert rules.mig_profile_for(MIG, 125) == "1g.10gb"
    assert rules.mig_profile_for(MIG, 250) == "2g.20gb"
    assert rules.mig_profile_for(MIG, 1000) == "7g.80gb"
    assert rules.sharing_problem(MIG, 2000) == (
        "A100-MIG is partitioned with MIG: ask for at most one GPU per replica."
    )
    nodes = [NodeSpec("n1", "hub", "A100-MIG", 8, 96_000, 1_000_000, mig_layout=("1g.10gb",))]
    problems = rules.capacity_problems(250, 1, context(gpu_class=MIG, nodes=nodes))
    assert problems == {"gpu_milli": "No A100-MIG GPU is partitioned with a 2g.20gb instance."}


def test_a_fraction_of_a_whole_class_names_the_classes_that_share() -> None:
    problems = rules.request_problems(
        replace(JOB, gpu_milli=500), context(sharing_classes=("L40S-TS", "A100-MIG"))
    )
    assert problems == {
        "gpu_milli": "H100 gives whole GPUs only; ask for 1 GPU or pick a class that shares "
        "GPUs. Classes that share GPUs: A100-MIG, L40S-TS."
    }


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_DISABLE_CONTROL",
        "CUDA_DEVICE_MEMORY_LIMIT",
        "CUDA_DEVICE_MEMORY_LIMIT_0",
        "CUDA_DEVICE_SM_LIMIT",
        "CUDA_MPS_PIPE_DIRECTORY",
        "LD_PRELOAD",
        "GPUPAAS_CHECKPOINT_DIR",
    ],
)
def test_gpu_runtime_and_platform_variables_are_reserved(name: str) -> None:
    message = rules.env_problem("training", {name: "x"})
    assert message is not None and message.startswith(f"{name} is reserved")


@pytest.mark.parametrize("name", ["É", "A²", "1X", "MY-VAR", "", "A B", "X\n"])
def test_environment_names_are_ascii_c_identifiers(name: str) -> None:
    assert rules.env_problem("training", {name: "x"}) == (
        f"“{name}” is not an environment variable name: use ASCII letters, digits and _, "
        "not starting with a digit."
    )


def test_good_environment_names_pass() -> None:
    assert rules.env_problem("training", {"HF_HOME": "/x", "_A1": "", "CUDA_HOME": "/c"}) is None


def test_a_rule_set_refusal_names_each_field_once() -> None:
    request = replace(
        JOB,
        name="",
        gpu_milli=1500,
        priority_class="production",
        env={"LD_PRELOAD": "x"},
        command=(),
        retries=11,
    )
    problems = rules.request_problems(request, context())
    assert set(problems) == {"name", "gpu_milli", "priority_class", "env", "command", "retries"}


def test_a_slice_of_a_time_sliced_class_is_charged_the_whole_slice_against_the_quota() -> None:
    sliced = GpuClassSpec(
        name="L4", sharing_mode="timeslice", memory_mib=24576, timeslice_replicas=4
    )
    request = replace(JOB, gpu_milli=1)
    assert rules.charge_of(request, sliced).total_milli == 250
    tight = Quota("Vision", "L4", guaranteed_milli=100, limit_milli=200)
    assert rules.request_problems(request, context(gpu_class=sliced, quota=tight))["gpu_milli"] == (
        "This is charged 0.25 GPU of L4 (what the cluster grants), more than Vision's limit "
        "of 0.2 GPU."
    )


def test_a_gang_larger_than_the_nodes_of_one_cluster_is_refused_at_submit() -> None:
    @dataclass(frozen=True)
    class N:
        gpu_count: int = 8
        cpu_milli: int = 192_000
        memory_mib: int = 2_000_000
        mig_layout: tuple[str, ...] = ()
        cluster_id: int = 1

    fleet = (N(), N(), N(cluster_id=2), N(gpu_count=2))
    ctx = context(nodes=fleet)
    assert "replicas" not in rules.capacity_problems(8000, 2, ctx, gang=True)
    refused = rules.capacity_problems(8000, 3, ctx, gang=True)
    assert refused["replicas"].startswith("A job of 3 replicas runs one replica per node")
    assert "at most 2" in refused["replicas"]
    # Trials of a sweep are not a gang: three at once need no three nodes.
    assert "replicas" not in rules.capacity_problems(8000, 3, ctx)


@pytest.mark.parametrize(
    "char",
    [
        "\u202e",  # right-to-left override
        "\u202a",  # left-to-right embedding
        "\u2066",  # left-to-right isolate
        "\u200f",  # right-to-left mark
        "\u200b",  # zero-width space
        "\u2028",  # line separator
        "\ufeff",  # byte order mark
        "\u0085",  # next line (C1 control)
    ],
)
def test_names_with_bidi_overrides_or_invisible_characters_are_refused(char: str) -> None:
    problem = rules.name_problem(f"invoice{char}fdp.exe")
    assert problem is not None
    assert "control characters" in problem or f"U+{ord(char):04X}" in problem


@pytest.mark.parametrize("name", ["résumé-bert", "模型-训练", "שלום-run", "llama 3 · 8B"])
def test_names_in_any_script_are_accepted(name: str) -> None:
    assert rules.name_problem(name) is None


def test_too_many_arguments_is_said_in_good_grammar() -> None:
    problems = rules.command_problems(core.KIND_TRAINING, ["python"], ["x"] * (rules.MAX_WORDS + 1))
    assert problems["args"] == f"The arguments have {rules.MAX_WORDS + 1} words; at most 200."
    problems = rules.command_problems(core.KIND_TRAINING, ["x"] * (rules.MAX_WORDS + 1), [])
    assert problems["command"].startswith("The command has ")


def test_a_dra_class_whose_nodes_publish_no_devices_is_refused_naming_the_class() -> None:
    problems = rules.request_problems(JOB, context(dra_unpublished=True))
    assert problems == {
        "gpu_class": "H100 allocates GPUs through Dynamic Resource Allocation, but none of its "
        "nodes publishes devices (ResourceSlices of NVIDIA's DRA driver, gpu.nvidia.com), so "
        "nothing of it can start. Ask a platform admin to check the driver on its nodes, or "
        "pick another class."
    }
    assert rules.request_problems(JOB, context(dra_unpublished=False)) == {}
