"""The request rules for secret references, on plain data."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from apps.workloads import core, rules


@dataclass(frozen=True)
class S:
    name: str
    owner_id: int | None
    keys: tuple[str, ...]
    k8s_name: str


@dataclass(frozen=True)
class G:
    name: str = "A100"
    sharing_mode: str = "whole"
    memory_mib: int = 81920
    mig_profiles: tuple[str, ...] = ()
    timeslice_replicas: int | None = None
    hami_split_count: int | None = None
    enabled: bool = True


@dataclass(frozen=True)
class I:  # noqa: E742
    name: str = "pytorch"
    kind: str = "training"
    enabled: bool = True


@dataclass(frozen=True)
class Q:
    limit_milli: int = 8000
    per_user_cap_milli: int | None = None


ME, MATE = 1, 2
SECRETS = (
    S("hf", None, ("token",), "gpp-s-team"),
    S("wandb", None, ("WANDB_API_KEY", "WANDB_ENTITY"), "gpp-s-wandb"),
    S("hf", ME, ("token",), "gpp-s-mine"),
    S("s3", ME, ("access", "secret"), "gpp-s-s3"),
)
CONTEXT = rules.Context(
    team="vision", leads=False, gpu_class=G(), image=I(), quota=Q(), actor_id=ME, secrets=SECRETS
)


def request(*refs: dict[str, Any], env: dict[str, str] | None = None) -> rules.WorkloadRequest:
    return rules.WorkloadRequest(
        kind=core.KIND_TRAINING,
        name="t",
        gpu_milli=1000,
        command=("python", "train.py"),
        env=env or {},
        secrets=tuple(rules.SecretRef.of(r) for r in refs),
    )


def problems(*refs: dict[str, Any], context: rules.Context = CONTEXT, **kw: Any) -> str | None:
    return rules.request_problems(request(*refs, **kw), context).get("secrets")


def test_a_reference_to_a_team_secret_is_accepted_and_resolved() -> None:
    req = request({"name": "wandb"}, {"name": "s3", "env": "AWS_SECRET", "key": "secret"})
    assert rules.request_problems(req, CONTEXT) == {}
    assert rules.charge_of(req, CONTEXT.gpu_class, CONTEXT).secrets == (
        {
            "name": "wandb",
            "env": "",
            "key": "",
            "scope": "team",
            "owner": None,
            "k8s_name": "gpp-s-wandb",
        },
        {
            "name": "s3",
            "env": "AWS_SECRET",
            "key": "secret",
            "scope": "personal",
            "owner": ME,
            "k8s_name": "gpp-s-s3",
        },
    )


def test_own_personal_secret_comes_before_the_team_one_of_that_name() -> None:
    req = request({"name": "hf", "env": "HF_TOKEN"})
    (ref,) = rules.charge_of(req, CONTEXT.gpu_class, CONTEXT).secrets
    assert (ref["k8s_name"], ref["key"], ref["scope"]) == ("gpp-s-mine", "token", "personal")
    team = request({"name": "hf", "env": "HF_TOKEN", "scope": "team"})
    assert rules.charge_of(team, CONTEXT.gpu_class, CONTEXT).secrets[0]["k8s_name"] == "gpp-s-team"


def test_a_missing_secret_is_refused_with_a_field_message() -> None:
    assert problems({"name": "nope", "env": "X"}) == (
        "No secret named “nope” in vision that you may use; create it first (the Secrets "
        "page, or gpupaas secret create)."
    )


def test_a_teammates_personal_secret_is_refused() -> None:
    mates = replace(CONTEXT, actor_id=MATE)
    # the teammate does not see it: by name it is not there for them
    assert "No secret named “s3”" in (problems({"name": "s3"}, context=mates) or "")
    # a clone of my request, by the teammate: refused by what was recorded
    recorded = {"name": "hf", "env": "HF_TOKEN", "key": "token", "scope": "personal", "owner": ME}
    assert problems(recorded, context=mates) == (
        "hf is someone else's personal secret: only its owner may use it. Create your own "
        "secret and refer to it."
    )
    assert problems(recorded) is None  # my own clone is fine


def test_keys_and_variable_names_are_checked() -> None:
    assert "has no key “nope”" in (problems({"name": "hf", "env": "T", "key": "nope"}) or "")
    assert "say which one" in (problems({"name": "s3", "env": "T"}) or "")
    assert "Name the variable" in (problems({"name": "s3", "key": "access"}) or "")
    assert "reserved" in (problems({"name": "hf", "env": "GPUPAAS_X"}) or "")
    assert "cannot be a variable name" in (
        problems(
            {"name": "s3"},
            context=replace(CONTEXT, secrets=(S("s3", ME, ("access-key",), "gpp-s-x"),)),
        )
        or ""
    )
    assert problems({"name": "hf", "env": "TOKEN"}, env={"TOKEN": "x"}) == (
        "TOKEN is set twice (by a plain variable and the secret hf)."
    )
    assert "set twice" in (
        problems({"name": "hf", "env": "T"}, {"name": "s3", "env": "T", "key": "access"}) or ""
    )


def test_references_are_capped() -> None:
    refs = [{"name": "hf", "env": f"V{i}"} for i in range(rules.MAX_SECRET_REFS + 1)]
    assert problems(*refs) == "17 secret references; at most 16."
