"""The objects of a workload of any kind: the one dispatch on its kind. Pure."""

from __future__ import annotations

from apps.orchestration.manifests.base import Manifest
from apps.orchestration.manifests.claims import with_claim_template
from apps.orchestration.manifests.endpoints import endpoint_manifests
from apps.orchestration.manifests.jobs import sweep_manifests, training_manifests
from apps.orchestration.manifests.notebooks import notebook_manifests
from apps.orchestration.manifests.spec import WorkloadSpec
from apps.workloads import core as wl


def workload_manifests(spec: WorkloadSpec) -> list[Manifest]:
    """The objects of a workload (without the notebook's Secret and home volume)."""
    if spec.kind == wl.KIND_INFERENCE:
        return with_claim_template(spec, endpoint_manifests(spec))
    if spec.kind == wl.KIND_NOTEBOOK:
        return with_claim_template(spec, notebook_manifests(spec))
    if spec.kind == wl.KIND_SWEEP:
        return with_claim_template(spec, sweep_manifests(spec))
    if spec.kind == wl.KIND_TRAINING:
        return with_claim_template(spec, training_manifests(spec))
    raise ValueError(f"No manifests for workloads of kind {spec.kind!r}.")
