"""The heat map as plain data: every physical GPU of a node with its MIG instances (drawn as
partitions of it) or the pods time-slicing it inside, who holds each (workload, team), and how
many of the node's GPUs its exporter measures. No database, no Prometheus: :func:`heat_nodes`
takes the readings and what the database says about their pods."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from apps.catalog.core import MIG_PROFILE_RE
from apps.telemetry.core import GpuReading

# Compute slices of a MIG-capable GPU: seven on A100, H100 and H200, four on an A30.
MIG_SLICES = 7
MIG_SLICES_BY_MODEL = {"A30": 4}


def mig_slices_of(model: str) -> int:
    """Compute slices of a GPU of this model (``NVIDIA A30`` → 4, else 7)."""
    words = model.upper().replace("-", " ").split()
    return next((n for name, n in MIG_SLICES_BY_MODEL.items() if name in words), MIG_SLICES)


def profile_slices(profile: str) -> int:
    """Compute slices of a MIG profile (``2g.12gb`` → 2); 1 where the profile is unknown."""
    match = MIG_PROFILE_RE.match(profile)
    return int(match.group("slices")) if match else 1


@dataclass(frozen=True)
class Holder:
    """Who holds a GPU or part of one: the team always; the workload where the viewer may open
    it."""

    team: str
    workload: str = ""
    workload_id: int | None = None

    @property
    def label(self) -> str:
        return f"{self.workload} · {self.team}" if self.workload else f"a workload of {self.team}"


@dataclass
class HeatCell:
    """One MIG instance, or a whole GPU (shared by time slices or not)."""

    label: str
    utilisation: float | None
    pods: list[str] = field(default_factory=list)
    workloads: list[tuple[int, str]] = field(default_factory=list)
    reported: bool = True  # False: in the inventory, but its exporter reports nothing
    holders: list[Holder] = field(default_factory=list)
    instance: str = ""
    profile: str = ""
    slices: int = 1  # of the GPU's compute slices (1 of 1 for a whole GPU)

    @property
    def percent(self) -> int | None:
        return None if self.utilisation is None else round(self.utilisation * 100)

    @property
    def reading(self) -> str:
        """What the cell says: a percentage, or "no data" where the GPU exports no utilisation."""
        return "no data" if self.utilisation is None else f"{self.percent}%"

    @property
    def short(self) -> str:
        """The cell's text: its percentage, "n/d" when held or listed but unmeasured, else ""."""
        if self.percent is not None and (self.pods or self.holders):
            return str(self.percent)
        if self.pods or self.holders or not self.reported:
            return "n/d" if self.percent is None else str(self.percent)
        return ""

    @property
    def who(self) -> str:
        """Who holds it, in words: "free" when nobody does."""
        if not self.holders and self.pods:
            return "a pod outside the platform"
        return ", ".join(h.label for h in self.holders) or "free"


@dataclass
class HeatGpu:
    """A physical GPU: its MIG instances (``slices`` of ``total_slices`` each), or one cell."""

    index: str
    uuid: str
    parts: list[HeatCell]
    total_slices: int = 1

    @property
    def label(self) -> str:
        return f"GPU {self.index}"

    @property
    def is_mig(self) -> bool:
        return any(p.instance or p.profile for p in self.parts)

    @property
    def sharing(self) -> str:
        """How it is split: "MIG", "3 time slices held", or "" for a GPU held whole."""
        if self.is_mig:
            return "MIG"
        pods = len(self.parts[0].pods) if self.parts else 0
        return f"{pods} time slices held" if pods > 1 else ""

    @property
    def reported(self) -> bool:
        return any(p.reported for p in self.parts)

    @property
    def measured(self) -> bool:
        """True when its exporter sends utilisation for it (or for one of its instances)."""
        return any(p.utilisation is not None for p in self.parts)

    @property
    def unused_slices(self) -> int:
        """Compute slices no MIG instance covers (drawn as an empty gap)."""
        return max(0, self.total_slices - sum(p.slices for p in self.parts)) if self.is_mig else 0

    @property
    def holders(self) -> list[Holder]:
        seen: dict[Holder, None] = {}
        for part in self.parts:
            seen.update(dict.fromkeys(part.holders))
        return list(seen)


@dataclass
class HeatNode:
    hostname: str
    model: str
    gpus: list[HeatGpu]

    @property
    def cells(self) -> list[HeatCell]:
        """Every cell of the node, GPU by GPU."""
        return [part for gpu in self.gpus for part in gpu.parts]

    @property
    def measured(self) -> int:
        return sum(1 for gpu in self.gpus if gpu.measured)

    @property
    def coverage(self) -> str:
        """How much of the node its exporter measures: "2 of 2 GPUs measured"; a node whose
        exporter sends only memory says so, one it reports nothing of says that."""
        total = len(self.gpus)
        noun = "GPU" if total == 1 else "GPUs"
        reported = sum(1 for gpu in self.gpus if gpu.reported)
        if total and not reported:
            return f"exporter reports none of its {total} {noun}"
        text = f"{self.measured} of {total} {noun} measured"
        if reported > self.measured:
            text += f" ({reported - self.measured} report memory only)"
        if reported < total:
            text += f"; {total - reported} not reported"
        return text


def heat_nodes(
    readings: Iterable[GpuReading],
    *,
    pod_owner: Mapping[tuple[str, str], int],
    holders: Mapping[int, Holder],
    inventory: Iterable[tuple[str, Iterable[str]]] = (),
) -> list[HeatNode]:
    """The heat map from the readings: ``pod_owner`` (namespace, pod) → workload id,
    ``holders`` workload id → who holds it as the viewer may see it, ``inventory`` (node, GPU
    UUIDs) of the enabled clusters. A GPU is drawn on the node the inventory says holds its
    UUID; one the inventory knows and no exporter reports is drawn as "not reported"."""
    inventory = [(name, [str(u) for u in uuids or ()]) for name, uuids in inventory]
    uuid_node = {uuid: name for name, uuids in inventory for uuid in uuids}
    gpus: dict[tuple[str, str], HeatGpu] = {}
    cells: dict[tuple[str, str, str], HeatCell] = {}
    models: dict[str, str] = {}
    for reading in readings:
        series = reading.series
        host = uuid_node.get(series.uuid, series.hostname)
        models.setdefault(host, series.model)
        gpu = gpus.get((host, series.uuid))
        if gpu is None:
            gpu = gpus[(host, series.uuid)] = HeatGpu(series.gpu, series.uuid, [])
        cell = cells.get((host, series.uuid, series.instance))
        if cell is None:
            label = f"GPU {series.gpu}"
            if series.is_mig:
                label += f" · {series.profile or 'MIG'} · instance {series.instance or '?'}"
                gpu.total_slices = mig_slices_of(series.model)
            cell = HeatCell(label=label, utilisation=None, instance=series.instance)
            cell.profile = series.profile
            cell.slices = profile_slices(series.profile) if series.is_mig else 1
            cells[(host, series.uuid, series.instance)] = cell
            gpu.parts.append(cell)
        owner = pod_owner.get(series.pod_key)
        value = reading.utilisation
        if owner is None:
            # Not a workload's pod (or the exporter's own labels): the device's value only.
            if not cell.pods and value is not None:
                cell.utilisation = max(cell.utilisation or 0.0, value)
            continue
        cell.pods.append(series.pod)
        if series.per_pod and not series.is_mig:
            cell.utilisation = min(1.0, (cell.utilisation or 0.0) + (value or 0.0))
        elif value is not None:
            cell.utilisation = max(cell.utilisation or 0.0, value)
        holder = holders.get(owner)
        if holder is not None and holder not in cell.holders:
            cell.holders.append(holder)
            if holder.workload_id is not None:
                cell.workloads.append((holder.workload_id, holder.workload))
    seen = {uuid for _, uuid in gpus}
    for name, uuids in inventory:
        for index, uuid in enumerate(uuids):
            if uuid not in seen:
                cell = HeatCell(label=f"GPU {index}", utilisation=None, reported=False)
                gpus[(name, uuid)] = HeatGpu(str(index), uuid, [cell])
    by_node: dict[str, list[HeatGpu]] = defaultdict(list)
    for (host, _), gpu in gpus.items():
        gpu.parts.sort(key=lambda c: _int(c.instance))
        by_node[host].append(gpu)
    return [
        HeatNode(host, models.get(host, ""), sorted(node_gpus, key=lambda g: _int(g.index)))
        for host, node_gpus in sorted(by_node.items())
    ]


def _int(text: str) -> int:
    return int(text) if text.isdigit() else 0
