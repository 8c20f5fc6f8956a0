"""The scheduler: how often its cycle runs, preemption grace, burst waits, fair share and the
least runtime before a workload may be preempted."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from gpupaas.settings.env import env_int, env_optional_str, env_str

# The cycle runs after every submit and cancel, and every SCHEDULING_CYCLE_SECONDS from beat.
SCHEDULING_CYCLE_SECONDS = env_int("SCHEDULING_CYCLE_SECONDS", 5, minimum=1)
# Seconds a preempted pod gets to checkpoint: per priority class (apps.workloads.core
# PREEMPTION_GRACE_SECONDS) unless this sets one number for every class. The pod's
# terminationGracePeriodSeconds, the scheduler's wait before requeueing and the message agree.
SCHEDULING_PREEMPTION_GRACE_SECONDS: int | None = (
    env_int("SCHEDULING_PREEMPTION_GRACE_SECONDS", 0, minimum=0)
    if env_optional_str("SCHEDULING_PREEMPTION_GRACE_SECONDS")
    else None
)
# How long a request of each priority class waits for the hub and spoke clusters before it may
# run on a burst cluster (if its team may burst).
SCHEDULING_BURST_WAIT_SECONDS: dict[str, int] = {
    "production": env_int("SCHEDULING_BURST_WAIT_PRODUCTION_SECONDS", 120, minimum=0),
    "training": env_int("SCHEDULING_BURST_WAIT_TRAINING_SECONDS", 900, minimum=0),
    "development": env_int("SCHEDULING_BURST_WAIT_DEVELOPMENT_SECONDS", 300, minimum=0),
    "batch": env_int("SCHEDULING_BURST_WAIT_BATCH_SECONDS", 3600, minimum=0),
}
SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS = env_int(
    "SCHEDULING_FAIR_SHARE_HALF_LIFE_SECONDS", 6 * 3600, minimum=60
)
SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS", 600, minimum=0
)
SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_DEVELOPMENT_SECONDS", 300, minimum=0
)
SCHEDULING_MIN_RUNTIME_BATCH_SECONDS = env_int(
    "SCHEDULING_MIN_RUNTIME_BATCH_SECONDS", 120, minimum=0
)


def _topology_levels(value: str) -> tuple[tuple[str, str], ...]:
    """``name=label,…`` widest level first; a malformed entry fails loudly at start."""
    levels = []
    for entry in filter(None, (e.strip() for e in value.split(","))):
        name, sep, label = (part.strip() for part in entry.partition("="))
        if not sep or not name or not label or not name.replace("-", "").isalnum():
            raise ImproperlyConfigured(
                f"SCHEDULING_TOPOLOGY_LEVELS: {entry!r} is not name=node-label "
                "(e.g. rack=cloud.provider.com/topology-rack)"
            )
        levels.append((name, label))
    if len({name for name, _label in levels}) != len(levels):
        raise ImproperlyConfigured("SCHEDULING_TOPOLOGY_LEVELS names a level twice")
    return tuple(levels)


# Topology levels gangs are kept inside, widest first: a level's name (what a request asks
# for: "rack") and the node label whose value names the node's domain at that level. The
# defaults are Kueue's documented example labels and NVIDIA's NVLink domain (GPU Feature
# Discovery's nvidia.com/gpu.clique, on GB200 NVL72 and the like); kubernetes.io/hostname
# is no level here, a gang's replicas are always on different nodes.
SCHEDULING_TOPOLOGY_LEVELS = _topology_levels(
    env_str(
        "SCHEDULING_TOPOLOGY_LEVELS",
        "block=cloud.provider.com/topology-block,rack=cloud.provider.com/topology-rack,"
        "nvlink=nvidia.com/gpu.clique",
    )
)
