"""What a registered dataset may be. Pure.

A dataset is data a team reads in its notebooks and jobs (DESIGN.md, "Data and secrets"),
registered by a lead or an admin: a volume claim that exists in the team namespace, mounted
read-only at /datasets/<name>; or an object-store prefix (``s3://bucket/prefix``) handed to the
pod as GPUPAAS_DATASET_<NAME>_URI, with the keys of a team secret if one is named. Requests
refer to datasets by name.
"""

from __future__ import annotations

import re

KIND_CLAIM = "claim"
KIND_OBJECT = "object"
KINDS = (KIND_CLAIM, KIND_OBJECT)

MAX_NAME_LENGTH = 40  # "dataset-<name>" is a pod's volume name: a DNS label
MAX_URI_LENGTH = 1024
MOUNT_ROOT = "/datasets"

# DNS-1123 label: lower-case letters, digits and -, starting and ending alphanumeric.
NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# A PersistentVolumeClaim's name: a DNS-1123 subdomain.
CLAIM_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# An object-store prefix: scheme://bucket[/prefix], printable ASCII without spaces.
URI_RE = re.compile(r"(s3|gs|az|abfs|abfss|oci)://[a-z0-9]([-a-z0-9._]*[a-z0-9])?(/[!-~]*)?")


def mount_path(name: str) -> str:
    return f"{MOUNT_ROOT}/{name}"


def name_problem(name: str) -> str | None:
    if not isinstance(name, str) or not name:
        return "Give the dataset a name."
    if len(name) > MAX_NAME_LENGTH:
        return f"The name has {len(name)} characters; at most {MAX_NAME_LENGTH}."
    if not NAME_RE.fullmatch(name):
        return (
            f"“{name}” cannot name a dataset: use lower-case letters, digits and -, starting "
            "and ending with a letter or digit (e.g. imagenet)."
        )
    return None


def problems(*, name: str, kind: str, claim: str = "", uri: str = "") -> dict[str, str]:
    """Field → message for a dataset to register (whether the claim or secret exists is the
    service's to check)."""
    errors: dict[str, str] = {}
    problem = name_problem(name)
    if problem:
        errors["name"] = problem
    if kind == KIND_CLAIM:
        if not isinstance(claim, str) or not claim:
            errors["claim"] = "Name the volume claim of the team namespace that holds the data."
        elif len(claim) > 253 or not CLAIM_RE.fullmatch(claim):
            errors["claim"] = f"“{claim}” is not the name of a volume claim."
        if uri:
            errors["uri"] = "A claim dataset has no object-store prefix."
    elif kind == KIND_OBJECT:
        if not isinstance(uri, str) or not uri:
            errors["uri"] = "Give the object-store prefix (e.g. s3://bucket/imagenet/)."
        elif len(uri) > MAX_URI_LENGTH or not URI_RE.fullmatch(uri):
            errors["uri"] = (
                f"“{uri[:100]}” is not an object-store prefix such as s3://bucket/prefix "
                "(schemes: s3, gs, az, abfs, abfss, oci)."
            )
        if claim:
            errors["claim"] = "An object-store dataset has no volume claim."
    else:
        errors["kind"] = f"“{kind}” is not a kind of dataset; use claim or object."
    return errors
