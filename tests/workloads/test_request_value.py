"""The request as one value: what a door's values and a recorded workload's fields become."""

from __future__ import annotations

import pytest

from apps.workloads import core, rules
from apps.workloads.request import EndpointRequest, SecretRef, WorkloadRequest


def test_a_doors_lists_and_dicts_become_the_request_the_rules_read() -> None:
    request = WorkloadRequest.of(
        kind=core.KIND_TRAINING,
        name="train",
        gpu_milli=1000,
        replicas=None,
        command=["python", "train.py"],
        args=None,
        env={"A": "1"},
        secrets=[{"name": "hf", "env": "HF_TOKEN", "key": "token"}],
        datasets=["imagenet"],
        retries=2,
    )
    assert request == WorkloadRequest(
        kind=core.KIND_TRAINING,
        name="train",
        gpu_milli=1000,
        command=("python", "train.py"),
        env={"A": "1"},
        secrets=(SecretRef(name="hf", env="HF_TOKEN", key="token"),),
        datasets=("imagenet",),
        retries=2,
    )


def test_a_field_the_request_does_not_have_is_refused_at_once() -> None:
    with pytest.raises(TypeError):
        WorkloadRequest.of(kind=core.KIND_TRAINING, name="t", gpu_milli=1000, gpus=1)


def test_a_recorded_sweep_is_read_back_from_its_params_keeping_the_rest() -> None:
    recorded = {
        "grid": {"lr": ["0.1", "0.01"]},
        "parallelism": 2,
        "pod_annotations": {"kubesim.io/run-duration": "1s"},
    }
    request = WorkloadRequest.of(kind=core.KIND_SWEEP, name="s", gpu_milli=500, params=recorded)
    assert request.grid == {"lr": ["0.1", "0.01"]}
    assert request.parallelism == 2
    assert not request.sampled
    assert request.params == {"pod_annotations": {"kubesim.io/run-duration": "1s"}}


def test_a_recorded_sampling_sweep_keeps_its_seed() -> None:
    recorded = {"ranges": {"lr": [1e-5, 1e-3, "log"]}, "samples": 4, "seed": 7}
    request = WorkloadRequest.of(kind=core.KIND_SWEEP, name="s", gpu_milli=500, params=recorded)
    assert (request.ranges, request.samples, request.seed) == (recorded["ranges"], 4, 7)
    assert request.sampled and request.params == {}


def test_values_given_win_over_recorded_ones() -> None:
    request = WorkloadRequest.of(
        kind=core.KIND_SWEEP,
        name="s",
        gpu_milli=500,
        grid={"bs": ["32"]},
        params={"grid": {"lr": ["0.1"]}, "parallelism": 3},
    )
    assert request.grid == {"bs": ["32"]}
    assert request.parallelism == 3


def test_an_endpoint_takes_its_settings_given_or_recorded_and_other_kinds_none() -> None:
    given = WorkloadRequest.of(
        kind=core.KIND_INFERENCE, name="e", gpu_milli=1000, endpoint={"port": 9000}
    )
    assert given.endpoint == EndpointRequest(port=9000)
    recorded = WorkloadRequest.of(
        kind=core.KIND_INFERENCE,
        name="e",
        gpu_milli=1000,
        params={"endpoint": {"port": 9001, "revision": 3, "target_replicas": 1}},
    )
    assert recorded.endpoint == EndpointRequest(port=9001)
    assert recorded.params == {}
    assert WorkloadRequest.of(kind=core.KIND_INFERENCE, name="e", gpu_milli=1000).endpoint == (
        EndpointRequest()
    )
    training = WorkloadRequest.of(
        kind=core.KIND_TRAINING, name="t", gpu_milli=1000, endpoint={"port": 9000}
    )
    assert training.endpoint is None


def test_a_recorded_workloads_resolved_datasets_and_secrets_are_read_by_name() -> None:
    request = WorkloadRequest.of(
        kind=core.KIND_TRAINING,
        name="t",
        gpu_milli=1000,
        datasets=[{"name": "imagenet", "kind": "claim", "claim": "imagenet-pvc"}],
        secrets=[{"name": "hf", "env": "HF_TOKEN", "scope": "personal", "owner": 4}],
    )
    assert request.datasets == ("imagenet",)
    assert request.secrets == (SecretRef(name="hf", env="HF_TOKEN", scope="personal", owner=4),)


def test_the_rules_module_still_offers_the_request_value() -> None:
    assert rules.WorkloadRequest is WorkloadRequest
    assert rules.SecretRef is SecretRef
    assert rules.EndpointRequest is EndpointRequest
