"""The exporter variants the simulator imitates (:data:`EXPORTERS`), the annotations it reads
and the metric families it emits."""

from __future__ import annotations

from dataclasses import dataclass

ANNOTATION_PROFILE = "kubesim.io/gpu-utilisation"
ANNOTATION_PERIOD = "kubesim.io/gpu-utilisation-period"
ANNOTATION_HAMI_UUID = "nvidia.com/use-gpuuuid"
ANNOTATION_GPU_UUIDS = "kubesim.io/gpu-uuids"
ANNOTATION_MIG_DEVICES = "kubesim.io/mig-devices"
DEFAULT_PROFILE = "busy"
DEFAULT_DRIVER = "570.133.20"
PROFILES = ("busy", "idle", "bursty", "ramping")
EXPORTER_POD_LABEL = ("app", "nvidia-dcgm-exporter")
# GPU instance ids the driver gives MIG instances of a 7-slice GPU, by compute slices: the
# first id of each size (later ones of the same size follow it).
MIG_INSTANCE_BASE = {1: 7, 2: 3, 3: 1, 4: 0, 7: 0}


@dataclass(frozen=True)
class ExporterProfile:
    """How one exporter variant labels and fills its series."""

    name: str
    host_label: str = "Hostname"  # "Hostname", "hostname" or "" (none)
    host_is_exporter_pod: bool = False  # the host label holds the exporter pod's name
    unowned: str = "empty"  # "empty": empty pod labels; "omit": no pod labels
    accounting_label: bool = False  # per-pod values on shared GPUs, labelled accounting="pod"
    pci_bus_id: bool = True
    driver_label: bool = True
    profiling: bool = True  # the DCGM_FI_PROF_* families
    mig_util: bool = True  # GPU_UTIL (0) on MIG devices
    mig_ids: str = "ordinal"  # "ordinal": 1..n per GPU; "placement": the driver's ids
    unmeasured: tuple[str, ...] = ()  # node name patterns: no GPU_UTIL nor GR_ENGINE_ACTIVE


UNMEASURED_DEFAULT = ("h100-3",)
EXPORTERS: dict[str, ExporterProfile] = {
    p.name: p
    for p in (
        ExporterProfile("agent", accounting_label=True),
        ExporterProfile("dcgm-3-h100", mig_ids="placement", unmeasured=UNMEASURED_DEFAULT),
        ExporterProfile(
            "dcgm-4-h100",
            host_label="hostname",
            host_is_exporter_pod=True,
            unowned="omit",
            pci_bus_id=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
        ExporterProfile(
            "dcgm-4-a30-mig",
            host_label="",
            unowned="omit",
            mig_util=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
        ExporterProfile(
            "dcgm-3-rtx",
            profiling=False,
            pci_bus_id=False,
            mig_ids="placement",
            unmeasured=UNMEASURED_DEFAULT,
        ),
    )
}
DEFAULT_EXPORTER = "agent"

HELP = {
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("counter", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("counter", "Total number of double-bit volatile ECC errors."),
}
