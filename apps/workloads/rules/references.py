"""A request's references to the team's secrets and datasets: checked, and resolved as the
workload records them. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.workloads.request import (
    SecretRef,
    WorkloadRequest,
)
from apps.workloads.rules.facts import Context, DatasetFacts, SecretFacts
from apps.workloads.rules.fields import env_name_problem
from apps.workloads.rules.limits import MAX_DATASET_REFS, MAX_SECRET_REFS, SECRET_SCOPES


def secret_of(ref: SecretRef, context: Context) -> SecretFacts | None:
    """The secret a reference names, among those the asking person may use: their personal one
    first, then the team's (a recorded scope says which)."""
    mine = [
        s
        for s in context.secrets
        if s.name == ref.name and s.owner_id is not None and s.owner_id == context.actor_id
    ]
    team = [s for s in context.secrets if s.name == ref.name and s.owner_id is None]
    if ref.scope == "personal" or ref.owner is not None:
        candidates = mine
    elif ref.scope == "team":
        candidates = team
    else:
        candidates = [*mine, *team]
    return candidates[0] if candidates else None


def secret_ref_problem(ref: SecretRef, context: Context) -> str | None:
    if not isinstance(ref.name, str) or not ref.name:
        return "Name the secret each reference uses."
    if not isinstance(ref.env, str) or not isinstance(ref.key, str):
        return f"The variable and key of {ref.name} must be text."
    if ref.scope and ref.scope not in SECRET_SCOPES:
        return f"Unknown scope “{ref.scope}” of {ref.name}; use team or personal."
    if ref.owner is not None and ref.owner != context.actor_id:
        return (
            f"{ref.name} is someone else's personal secret: only its owner may use it. Create "
            "your own secret and refer to it."
        )
    secret = secret_of(ref, context)
    if secret is None:
        return (
            f"No secret named “{ref.name}” in {context.team} that you may use; create it "
            "first (the Secrets page, or gpupaas secret create)."
        )
    if ref.env:
        if ref.key and ref.key not in secret.keys:
            return (
                f"The secret {ref.name} has no key “{ref.key}”; its keys: "
                f"{', '.join(secret.keys) or 'none'}."
            )
        if not ref.key and len(secret.keys) != 1:
            return (
                f"The secret {ref.name} has keys {', '.join(secret.keys)}; say which one "
                f"{ref.env} takes (NAME:ENV=KEY)."
            )
    elif ref.key:
        return f"Name the variable that takes {ref.name}'s key {ref.key} (NAME:ENV=KEY)."
    return None


def secret_env_names(ref: SecretRef, secret: SecretFacts) -> list[str]:
    """The variables a resolved reference sets."""
    return [ref.env] if ref.env else list(secret.keys)


def secrets_problem(request: WorkloadRequest, context: Context) -> str | None:
    refs = request.secrets
    if len(refs) > MAX_SECRET_REFS:
        return f"{len(refs)} secret references; at most {MAX_SECRET_REFS}."
    seen: dict[str, tuple[int, str]] = dict.fromkeys(request.env, (-1, "a plain variable"))
    for index, ref in enumerate(refs):
        problem = secret_ref_problem(ref, context)
        if problem:
            return problem
        secret = secret_of(ref, context)
        assert secret is not None
        for name in secret_env_names(ref, secret):
            problem = env_name_problem(name, kind=request.kind, reserved=context.reserved_env)
            if problem:
                if not ref.env:
                    problem = (
                        f"The key {name} of {ref.name} cannot be a variable name; name the "
                        f"variable for it (NAME:ENV=KEY). {problem}"
                    )
                return problem
            other, what = seen.setdefault(name, (index, f"the secret {ref.name}"))
            if other != index:
                return f"{name} is set twice (by {what} and the secret {ref.name})."
    return None


def resolved_secrets(refs: Sequence[SecretRef], context: Context) -> list[dict[str, Any]]:
    """The references of an accepted request as the workload records them: the secret's
    scope, owner and stored Kubernetes name, and the key each variable takes."""
    result = []
    for ref in refs:
        secret = secret_of(ref, context)
        assert secret is not None, "only for accepted requests"
        key = ref.key or (secret.keys[0] if ref.env else "")
        result.append(
            {
                "name": secret.name,
                "env": ref.env,
                "key": key,
                "scope": "team" if secret.owner_id is None else "personal",
                "owner": secret.owner_id,
                "k8s_name": secret.k8s_name,
            }
        )
    return result


# --- datasets -------------------------------------------------------------------------------------


def dataset_of(name: str, context: Context) -> DatasetFacts | None:
    """The team's dataset of that name: only the team's are in the context."""
    return next((d for d in context.datasets if d.name == name), None)


def datasets_problem(request: WorkloadRequest, context: Context) -> str | None:
    names = request.datasets
    if isinstance(names, str | bytes) or not isinstance(names, Sequence):
        return 'List the datasets by name (e.g. ["imagenet"]).'
    if len(names) > MAX_DATASET_REFS:
        return f"{len(names)} datasets; at most {MAX_DATASET_REFS}."
    seen: set[str] = set()
    for name in names:
        if not isinstance(name, str) or not name:
            return "Name each dataset the request uses."
        if name in seen:
            return f"The dataset {name} is named twice."
        seen.add(name)
        if dataset_of(name, context) is None:
            known = ", ".join(sorted(d.name for d in context.datasets)) or "none yet"
            return (
                f"No dataset named “{name[:100]}” in {context.team}; a request may use only its "
                f"team's datasets (registered by its leads: {known})."
            )
    return None


def resolved_datasets(names: Sequence[str], context: Context) -> list[dict[str, Any]]:
    """The datasets of an accepted request as the workload records them: where the data is,
    and the stored name and keys of the secret an object-store dataset names."""
    result = []
    for name in names:
        d = dataset_of(name, context)
        assert d is not None, "only for accepted requests"
        result.append(
            {
                "name": d.name,
                "kind": d.kind,
                "claim": d.claim,
                "uri": d.uri,
                "secret": d.secret_k8s_name,
                "secret_keys": list(d.secret_keys),
            }
        )
    return result
