"""The request rules for datasets named in a request, on plain data."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from apps.workloads import core, rules
from tests.workloads.test_secret_rules import CONTEXT as SECRET_CONTEXT


@dataclass(frozen=True)
class D:
    name: str
    kind: str = "claim"
    claim: str = ""
    uri: str = ""
    secret_k8s_name: str = ""
    secret_keys: tuple[str, ...] = ()


DATASETS = (
    D("imagenet", claim="imagenet-pvc"),
    D("weights", kind="object", uri="s3://m/w/", secret_k8s_name="gpp-s-1", secret_keys=("k",)),
)
CONTEXT = replace(SECRET_CONTEXT, datasets=DATASETS)


def request(names: Any) -> rules.WorkloadRequest:
    return rules.WorkloadRequest(
        kind=core.KIND_TRAINING,
        name="t",
        gpu_milli=1000,
        command=("python", "train.py"),
        datasets=names,
    )


def problem(names: Any, context: rules.Context = CONTEXT) -> str | None:
    return rules.request_problems(request(names), context).get("datasets")


def test_the_teams_datasets_are_accepted_and_recorded_resolved() -> None:
    req = request(["imagenet", "weights"])
    assert rules.request_problems(req, CONTEXT) == {}
    assert rules.charge_of(req, CONTEXT.gpu_class, CONTEXT).datasets == (
        {
            "name": "imagenet",
            "kind": "claim",
            "claim": "imagenet-pvc",
            "uri": "",
            "secret": "",
            "secret_keys": [],
        },
        {
            "name": "weights",
            "kind": "object",
            "claim": "",
            "uri": "s3://m/w/",
            "secret": "gpp-s-1",
            "secret_keys": ["k"],
        },
    )


def test_no_datasets_is_fine() -> None:
    assert problem(()) is None


def test_a_dataset_the_team_has_not_registered_is_refused_with_a_field_message() -> None:
    # Another team's dataset is not in this team's context: refused like any unknown name.
    assert problem(["coco"]) == (
        "No dataset named “coco” in vision; a request may use only its team's datasets "
        "(registered by its leads: imagenet, weights)."
    )
    assert problem(["coco"], replace(CONTEXT, datasets=())) == (
        "No dataset named “coco” in vision; a request may use only its team's datasets "
        "(registered by its leads: none yet)."
    )


def test_bad_lists_are_refused() -> None:
    assert problem("imagenet") == 'List the datasets by name (e.g. ["imagenet"]).'
    assert problem(["imagenet", "imagenet"]) == "The dataset imagenet is named twice."
    assert problem([""]) == "Name each dataset the request uses."
    assert problem([3]) == "Name each dataset the request uses."
    assert problem(["imagenet"] * 17) == "17 datasets; at most 16."
