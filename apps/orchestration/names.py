"""The names of a workload's Kubernetes objects as stored when they were created.

The builders name each object once, when it is created (``manifests.object_name``), and the
reconciler stores the names on the workload (``k8s_objects``); every reader takes them from
there, never from the naming scheme, which may change."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from apps.workloads.models import Workload


def stored_name(workload: Workload, kind: str, default: str = "") -> str:
    """The name stored when the workload's object of this kind was created, else ``default``
    (not created yet, or already deleted)."""
    ref = next((r for r in workload.k8s_objects or [] if r.get("kind") == kind), None)
    return str(ref["name"]) if ref else default
