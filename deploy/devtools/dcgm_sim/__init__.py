"""A dcgm-exporter stand-in for kubesim's simulated GPUs (development and tests only).

In parts: :mod:`.exporters` (the variants and the annotations read), :mod:`.cluster` (nodes,
pods and which pod holds which device), :mod:`.metrics` (utilisation and the exposition),
:mod:`.server` (the process).

It lists the GPU nodes of a cluster (GPU UUIDs and MIG devices from the node annotations
``kubesim.io/gpu-uuids`` and ``kubesim.io/mig-devices``) and the Running pods bound to them,
and serves ``/metrics`` in the Prometheus text format with dcgm-exporter's metric names and
labels (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``, ``container``/``namespace``/``pod`` of the pod holding the GPU or
MIG instance, ``GPU_I_PROFILE``/``GPU_I_ID`` for MIG)::

    python -m deploy.devtools.dcgm_sim --kubeconfig var/kubesim/admin.kubeconfig --port 9400

Which GPU a pod holds (kubesim has no device plugin, so the exporter decides, and remembers):

* the UUIDs of the pod's HAMi annotation ``nvidia.com/use-gpuuuid`` when present;
* otherwise, pods new to the exporter are taken in order of creation time (then uid), and each
  gets the lowest-index free devices of its node: whole GPUs for ``nvidia.com/gpu``, the first
  free instance of the profile (in ``kubesim.io/mig-devices`` order) for
  ``nvidia.com/mig-<profile>``, the lowest-index GPU with a free slice for each
  ``nvidia.com/gpu.shared`` (time-slicing), the lowest-index GPU with a free vGPU for HAMi.
  A pod keeps its devices until it is gone; devices never move between pods.

Utilisation follows the pod annotation ``kubesim.io/gpu-utilisation``, deterministic from the
time and the pod's uid (default ``busy``):

* ``busy``: 90–100 %; ``idle``: 0–2 %;
* ``bursty``: 95 % and 1 % alternating, half a period each (``kubesim.io/gpu-utilisation-period``,
  default 60s), phase from the uid;
* ``ramping``: from 0 at the pod's start to 100 % after the period (default 10m), then 100 %.

On a shared GPU (time-slicing, HAMi) every pod has its own series, carrying what that pod uses
(its profile × its share of the GPU) and the label ``accounting="pod"``, as the project's NVML
agent does from per-process accounting. MIG instances report ``DCGM_FI_DEV_GPU_UTIL`` 0 and
their activity in ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, as real MIG devices do.

Exporter variants (``--exporter NAME``; :data:`EXPORTERS`). ``agent`` is the project's pynvml
agent: every metric family, ``Hostname`` set to the node, per-pod series on shared GPUs with
``accounting="pod"``. The others reproduce what dcgm-exporter really emits:

* ``dcgm-3-h100`` (3.x): capitalised ``Hostname`` holding the node's name, ``pci_bus_id`` and
  the driver label, empty ``container``/``namespace``/``pod`` on unowned devices;
* ``dcgm-4-h100`` (4.x): lowercase ``hostname`` holding the name of the exporter's own pod (the
  pod labelled ``app=nvidia-dcgm-exporter`` on that node, if any), no ``pci_bus_id``, and no pod
  labels at all on unowned devices (so a Kubernetes scrape gives them the exporter pod's own
  ``namespace``/``pod`` target labels);
* ``dcgm-4-a30-mig`` (4.x on MIG nodes): no host label at all, MIG ``GPU_I_ID`` numbered as
  the driver numbers GPU instances (by placement: 1g at 7…, 2g at 3…, 3g at 1…), no GPU_UTIL on
  MIG devices;
* ``dcgm-3-rtx`` (3.x on workstation cards): no ``DCGM_FI_PROF_*`` family at all.

None of them has the ``accounting`` label or per-pod values on a shared GPU: every pod's series
repeats the device's value, as dcgm-exporter does. In every dcgm-exporter variant the GPUs of
the nodes matching ``unmeasured`` (default ``h100-3``) export neither
``DCGM_FI_DEV_GPU_UTIL`` nor ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a counter list without them),
only memory, power and health.
"""

from __future__ import annotations

from deploy.devtools.dcgm_sim.cluster import (
    Assignments,
    Device,
    Holding,
    Node,
    Pod,
    node_from_k8s,
    pod_from_k8s,
)
from deploy.devtools.dcgm_sim.exporters import (
    ANNOTATION_GPU_UUIDS,
    ANNOTATION_HAMI_UUID,
    ANNOTATION_MIG_DEVICES,
    ANNOTATION_PERIOD,
    ANNOTATION_PROFILE,
    DEFAULT_DRIVER,
    DEFAULT_EXPORTER,
    DEFAULT_PROFILE,
    EXPORTER_POD_LABEL,
    EXPORTERS,
    HELP,
    MIG_INSTANCE_BASE,
    PROFILES,
    UNMEASURED_DEFAULT,
    ExporterProfile,
)
from deploy.devtools.dcgm_sim.metrics import (
    exporter_pod_name,
    render,
    utilisation_percent,
)
from deploy.devtools.dcgm_sim.server import (
    Simulator,
    main,
    serve,
)

__all__ = [
    "ANNOTATION_GPU_UUIDS",
    "ANNOTATION_HAMI_UUID",
    "ANNOTATION_MIG_DEVICES",
    "ANNOTATION_PERIOD",
    "ANNOTATION_PROFILE",
    "DEFAULT_DRIVER",
    "DEFAULT_EXPORTER",
    "DEFAULT_PROFILE",
    "EXPORTERS",
    "EXPORTER_POD_LABEL",
    "HELP",
    "MIG_INSTANCE_BASE",
    "PROFILES",
    "UNMEASURED_DEFAULT",
    "Assignments",
    "Device",
    "ExporterProfile",
    "Holding",
    "Node",
    "Pod",
    "Simulator",
    "exporter_pod_name",
    "main",
    "node_from_k8s",
    "pod_from_k8s",
    "render",
    "serve",
    "utilisation_percent",
]
