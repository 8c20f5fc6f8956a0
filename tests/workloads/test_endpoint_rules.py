"""The endpoint request rules as plain data: the same field messages at every door."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from apps.scheduling.data import GpuClassSpec, Quota
from apps.workloads import rules


@dataclass(frozen=True)
class ImageSpec:
    name: str = "vLLM"
    kind: str = "serving"
    enabled: bool = True


@dataclass(frozen=True)
class Dataset:
    name: str
    kind: str = "claim"
    claim: str = "ds-weights"
    uri: str = ""
    secret_k8s_name: str = ""
    secret_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class Secret:
    name: str
    owner_id: int | None = None
    keys: tuple[str, ...] = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    k8s_name: str = "cred-t-1"


WHOLE = GpuClassSpec(name="H100", sharing_mode="whole", memory_mib=81559)
SLICED = GpuClassSpec(
    name="L40S-ts", sharing_mode="timeslice", memory_mib=46068, timeslice_replicas=4
)


def context(**kw: Any) -> rules.Context:
    values: dict[str, Any] = {
        "team": "Vision",
        "leads": True,
        "gpu_class": WHOLE,
        "image": ImageSpec(),
        "quota": Quota("Vision", "H100", guaranteed_milli=4000, limit_milli=8000),
        "datasets": (Dataset("weights"), Dataset("s3set", kind="object", claim="", uri="s3://b")),
        "secrets": (Secret("store"),),
        "actor_id": 7,
    }
    values.update(kw)
    return rules.Context(**values)


def endpoint(**kw: Any) -> rules.WorkloadRequest:
    return rules.WorkloadRequest(
        kind="inference",
        name="llm",
        gpu_milli=1000,
        endpoint=rules.EndpointRequest(model_path="/team/models/llama", **kw),
    )


def test_a_valid_endpoint_is_accepted_in_production_and_charged_one_replica() -> None:
    request = endpoint(min_replicas=2, max_replicas=4)
    assert rules.request_problems(request, context()) == {}
    charge = rules.charge_of(request, WHOLE, context())
    assert (charge.replicas, charge.priority_class) == (1, "production")
    assert charge.endpoint is not None
    assert charge.endpoint["scale_target"] == rules.DEFAULT_SCALE_TARGETS["rps"]


def test_bad_endpoint_fields_are_refused_with_field_messages() -> None:
    problems = rules.request_problems(
        endpoint(port=80, health_path="health check", min_replicas=3, max_replicas=2),
        context(),
    )
    assert problems["port"] == "The port is a whole number from 1024 to 65535."
    assert problems["health_path"].startswith("The health path starts with /")
    assert problems["min_replicas"] == "The minimum (3) is above the maximum (2) replicas."
    assert rules.request_problems(endpoint(port=65536), context())["port"]
    assert rules.request_problems(endpoint(port=True), context())["port"]
    assert "port" not in rules.request_problems(endpoint(port=1024), context())


def test_a_model_path_outside_the_team_volumes_is_refused() -> None:
    for path in ("/etc/passwd", "/team/../etc", "team/x", "/datasets/other/x", "/team/"):
        request = replace(endpoint(), endpoint=rules.EndpointRequest(model_path=path))
        assert "model_path" in rules.request_problems(request, context()), path
    named = replace(
        endpoint(),
        datasets=("weights",),
        endpoint=rules.EndpointRequest(model_path="/datasets/weights/llama"),
    )
    assert rules.request_problems(named, context()) == {}
    unnamed = replace(named, datasets=())
    assert (
        "is not a dataset this endpoint mounts"
        in rules.request_problems(unnamed, context())["model_path"]
    )


def test_an_object_store_model_takes_a_secret_the_person_may_use() -> None:
    ok = replace(
        endpoint(),
        endpoint=rules.EndpointRequest(model_uri="s3://models/llama", model_secret="store"),
    )
    assert rules.request_problems(ok, context()) == {}
    charge = rules.charge_of(ok, WHOLE, context())
    assert charge.endpoint and charge.endpoint["model_secret_k8s"] == "cred-t-1"
    missing = replace(
        ok, endpoint=replace(ok.endpoint or rules.EndpointRequest(), model_secret="x")
    )
    assert "No secret named" in rules.request_problems(missing, context())["model_secret"]
    bad = replace(ok, endpoint=rules.EndpointRequest(model_uri="file:///etc"))
    assert "is not a model URI" in rules.request_problems(bad, context())["model_uri"]


def test_a_fraction_only_where_the_class_shares_gpus() -> None:
    fraction = replace(endpoint(max_replicas=3), gpu_milli=250)
    assert "gives whole GPUs only" in rules.request_problems(fraction, context())["gpu_milli"]
    sliced = context(
        gpu_class=SLICED, quota=Quota("Vision", "L40S-ts", guaranteed_milli=1000, limit_milli=2000)
    )
    assert rules.request_problems(fraction, sliced) == {}


def test_endpoints_are_for_leads_in_production_and_only_on_guarantee() -> None:
    member = rules.request_problems(endpoint(), context(leads=False))
    assert member["priority_class"] == rules.ENDPOINT_PRIORITY_MEMBERS
    training = replace(endpoint(), priority_class="training")
    assert "production class" in rules.request_problems(training, context())["priority_class"]
    big = endpoint(min_replicas=5, max_replicas=8)
    assert "only on guaranteed quota" in rules.request_problems(big, context())["min_replicas"]


def test_scale_to_zero_needs_min_zero_and_an_idle_period() -> None:
    assert rules.request_problems(endpoint(min_replicas=0, idle_minutes=15), context()) == {}
    assert (
        "idle_minutes"
        in rules.request_problems(endpoint(min_replicas=0), context())["min_replicas"]
    )
    assert (
        "min_replicas 0"
        in rules.request_problems(endpoint(idle_minutes=15), context())["idle_minutes"]
    )
    gpu = endpoint(scale_metric="gpu", scale_target=150)
    assert "from 1 to 100" in rules.request_problems(gpu, context())["scale_target"]


def test_serving_images_only_for_endpoints() -> None:
    job = rules.WorkloadRequest(kind="training", name="t", gpu_milli=1000, command=("python",))
    assert "serving image" in rules.request_problems(job, context())["image"]
    assert (
        "not a serving image"
        in rules.request_problems(endpoint(), context(image=ImageSpec(kind="training")))["image"]
    )
