"""Placement of replicas on the GPUs of one class in one cluster (a *pool*). Pure.

A pool is the scheduler's working copy of free capacity during one cycle: it is built
from the node inventory, charged with the running workloads, and then asked for
placements. Rules (DESIGN.md, issue "Scheduling"):

- a fraction goes onto the GPU, of any node, where the expected fragment measured by
  :class:`~apps.scheduling.fragmentation.FragModel` grows least — in practice onto a
  partly used GPU, keeping whole GPUs free. The growth is squashed as the FGD
  simulator does (100·σ(−growth/scale), whole points): growths within a point of each
  other count as equal, and then the node that is left fullest (best fit on CPU and GPU)
  wins, then the first by name. On the Alibaba trace this beats both pure FGD and pure
  best fit (bench/README.md);
- a whole or multi-GPU replica takes fully free GPUs of one node;
- a gang (several replicas, a multi-node job) is placed whole in one pool or not at all,
  each replica on a different node: the manifests demand one replica per node, so a
  placement that stacks replicas on one node could never run;
- MIG requests take a free instance of their profile (fullest GPU first), and
  time-sliced requests take free replica slots of one GPU.

Nodes whose reduced state is equal (CPU level and sorted GPU states) form a group; a
group's score for a demand is computed once and reused until the group changes, so a
placement costs one pass over the distinct states, not over every node.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Protocol

from apps.catalog import core as catalog_core
from apps.scheduling.data import (
    GpuClassSpec,
    NodeSpec,
    ReplicaPlacement,
    TopologyAsk,
    TypicalRequest,
)
from apps.scheduling.fragmentation import (
    STATE_SHIFT,
    VGPU_MASK,
    FragModel,
    default_typical,
    replace_state,
)
from apps.scheduling.units import Demand, units_per_gpu

_MISSING: object = object()
# A placement found but not yet taken: (comparable score, node index, GPU indices, detail).
Choice = tuple[tuple[float, ...], int, tuple[int, ...], int | None]
# Fragment growth (in units) that moves the squashed score by about a quarter point near 0.
FRAG_SCALE = 500.0
# Across pools (PoolChooser): whole points of the squashed score that a pool's scarcity (its
# reserve for bound demand ÷ its capacity, 0–1) and the CPU a replica would strand (0–1)
# cost at most. Set on the trace family (bench/README.md), not on one trace.
SCARCITY_POINTS = 20
BALANCE_POINTS = 10


class Pool(Protocol):
    gpu_class: GpuClassSpec
    cluster: str
    epoch: int

    def find(self, demand: Demand) -> Choice | None: ...

    def commit(self, choice: Choice, demand: Demand) -> ReplicaPlacement: ...

    def place(self, demand: Demand) -> ReplicaPlacement | None: ...

    def choice_node(self, choice: Choice) -> str: ...

    def exclude(self, node: str) -> None: ...

    def include(self, node: str) -> None: ...

    def take(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None: ...

    def release(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None: ...

    def free_milli(self) -> int: ...

    def capacity_milli(self) -> int: ...

    def max_gpus_per_node(self) -> int: ...

    def node_count(self) -> int: ...

    def place_in_domain(
        self, demand: Demand, replicas: int, ask: TopologyAsk | None
    ) -> tuple[ReplicaPlacement, ...] | None: ...


class _Node:
    __slots__ = ("cpu", "gpus", "group", "idx", "mem", "spec")

    def __init__(self, idx: int, spec: NodeSpec, cap: int) -> None:
        self.idx = idx
        self.spec = spec
        self.cpu = spec.cpu_milli
        self.mem = spec.memory_mib
        self.gpus: list[int] = [cap << STATE_SHIFT] * spec.gpu_count
        for g in spec.down_gpus:  # a GPU that failed its health check has nothing free
            if 0 <= g < spec.gpu_count:
                self.gpus[g] = 0
        self.group: _Group | None = None


class _Group:
    __slots__ = ("cache", "frag", "key", "level", "maxfree", "members", "nfull", "states")

    def __init__(self, key: tuple[int, tuple[int, ...]], frag: float, cap: int) -> None:
        self.key = key
        self.level, self.states = key
        self.members: list[int] = []
        self.cache: dict[tuple[int, int, int, int], object] = {}
        self.frag = frag
        self.maxfree = (self.states[-1] >> STATE_SHIFT) if self.states else 0
        self.nfull = sum(1 for s in self.states if (s >> STATE_SHIFT) == cap)


Score = tuple[float, ...]
Found = tuple[Score, int, int | None]  # score, node index, chosen GPU state (fractions)


class TopologyIndex:
    """The nodes' topology domains per level (widest first): the node indices (in the given
    order) of each domain, a domain named by its path from the widest level down, so that
    racks of different blocks never merge. Nodes lacking a level's label are in no domain
    of it."""

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        levels: list[str] = []
        for node in nodes:
            if node.topology:
                levels = [level for level, _domain in node.topology]
                break
        self.levels: tuple[str, ...] = tuple(levels)
        self.domains: list[dict[tuple[str, ...], list[int]]] = [{} for _ in levels]
        for idx, node in enumerate(nodes):
            path = [domain for _level, domain in node.topology]
            for level in range(min(len(path), len(levels))):
                if not path[level]:
                    break
                self.domains[level].setdefault(tuple(path[: level + 1]), []).append(idx)

    def domain_of(self, node: NodeSpec, level: str) -> tuple[str, ...] | None:
        """The node's domain at ``level`` (its path), None outside any."""
        if level not in self.levels:
            return None
        depth = self.levels.index(level) + 1
        path = tuple(domain for _level, domain in node.topology[:depth])
        return path if len(path) == depth and all(path) else None


class GpuPool:
    """Whole, time-sliced and HAMi GPUs: each GPU has free units (and, for HAMi, vGPUs)."""

    def __init__(
        self,
        gpu_class: GpuClassSpec,
        cluster: str,
        nodes: Sequence[NodeSpec],
        model: FragModel,
        *,
        frag_scale: float = FRAG_SCALE,
    ) -> None:
        self.gpu_class = gpu_class
        self.frag_scale = frag_scale
        self.cluster = cluster
        self.cap = units_per_gpu(gpu_class)
        self.model = model
        # HAMi counts vGPUs per GPU against its split count; without one, only memory counts.
        split = (
            gpu_class.hami_split_count
            if gpu_class.sharing_mode == catalog_core.SHARING_HAMI
            else None
        )
        self.vgpu_step = 1 if split else 0
        self.split = min(VGPU_MASK, split) if split else VGPU_MASK
        self.epoch = 0
        # In domain order (then by name): ties fill one domain before the next, so small work
        # stays off the domains left whole for gangs. Without topology: by name.
        ordered = sorted(nodes, key=lambda n: (tuple(d for _level, d in n.topology), n.name))
        self.nodes = [_Node(i, spec, self.cap) for i, spec in enumerate(ordered)]
        self.topology = TopologyIndex(ordered)
        self._domain_failed: dict[tuple[int, int, int, int, int, int], int] = {}
        self.by_name = {n.spec.name: n for n in self.nodes}
        self._max_gpus = max((len(n.gpus) for n in self.nodes), default=0)
        # Best-fit tie-break: what is left on the node, each resource relative to the largest.
        self._cpu_norm = 0.5 / max([n.cpu for n in self.nodes if n.cpu] or [1])
        self._units_norm = 0.5 / max(1, self.cap * max([len(n.gpus) for n in self.nodes] or [1]))
        self.groups: dict[tuple[int, tuple[int, ...]], _Group] = {}
        self._failed: dict[tuple[int, int, int, int], int] = {}
        # Nodes set aside while a gang is placed (one replica per node): out of every group.
        self._excluded: set[int] = set()
        for node in self.nodes:
            self._regroup(node)

    # --- bookkeeping -------------------------------------------------------------------
    def _ungroup(self, node: _Node) -> None:
        old = node.group
        if old is not None:
            members = old.members
            del members[bisect_left(members, node.idx)]  # sorted: no scan of a large group
            old.cache.clear()
            if not old.members:
                del self.groups[old.key]
        node.group = None

    def _regroup(self, node: _Node) -> None:
        self._ungroup(node)
        if node.idx in self._excluded:
            return
        key = (self.model.level(node.cpu), tuple(sorted(node.gpus)))
        group = self.groups.get(key)
        if group is None:
            group = _Group(key, self.model.frag(*key), self.cap)
            self.groups[key] = group
        insort(group.members, node.idx)
        group.cache.clear()
        node.group = group

    def capacity_milli(self) -> int:
        return sum(len(n.gpus) for n in self.nodes) * 1000

    def free_milli(self) -> int:
        free_units = sum(s >> STATE_SHIFT for n in self.nodes for s in n.gpus)
        return free_units * 1000 // self.cap

    def max_gpus_per_node(self) -> int:
        return self._max_gpus

    def node_count(self) -> int:
        return len(self.nodes)

    # --- scoring -----------------------------------------------------------------------
    def _score(self, group: _Group, demand: Demand) -> Found | None:
        cpu, mem = demand.cpu_milli, demand.memory_mib
        node = None
        for idx in group.members:
            candidate = self.nodes[idx]
            if candidate.cpu >= cpu and candidate.mem >= mem:
                node = candidate
                break
        if node is None:
            return None
        model = self.model
        level = model.level(node.cpu - cpu)
        states = group.states
        units, gpus = demand.units, demand.gpus
        free_total = sum(s >> STATE_SHIFT for s in states)
        cpu_left = node.cpu - cpu
        if gpus == 0:
            after = model.frag(level, states)
            return self._rank(after - group.frag, cpu_left, free_total, node.idx), node.idx, None
        if units >= self.cap:
            if group.nfull < gpus:
                return None
            full = self.cap << STATE_SHIFT
            used = self.vgpu_step
            after = model.frag(level, replace_state(states, full, used, gpus))
            growth = after - group.frag
            return self._rank(growth, cpu_left, free_total - units * gpus, node.idx), node.idx, None
        best: tuple[float, int, int] | None = None
        previous = -1
        for state in states:
            if state == previous:
                continue
            previous = state
            free = state >> STATE_SHIFT
            if free < units or (state & VGPU_MASK) >= self.split:
                continue
            new = state - (units << STATE_SHIFT) + self.vgpu_step
            value = model.frag(level, replace_state(states, state, new))
            candidate_score = (value, free, state)
            if best is None or candidate_score < best:
                best = candidate_score
        if best is None:
            return None
        growth = best[0] - group.frag
        return self._rank(growth, cpu_left, free_total - units, node.idx), node.idx, best[2]

    def _rank(self, growth: float, cpu_left: int, units_left: int, idx: int) -> Score:
        """Lower is better: squashed fragment growth, then best fit, then node order."""
        x = growth / self.frag_scale
        squashed = int(100.0 / (1.0 + math.exp(min(50.0, max(-50.0, x)))))
        fit = cpu_left * self._cpu_norm + units_left * self._units_norm
        return float(-squashed), fit, float(idx)

    def find(self, demand: Demand) -> Choice | None:
        """The best node and GPUs for one replica, without taking them."""
        dkey = (demand.units, demand.gpus, demand.cpu_milli, demand.memory_mib)
        if self._failed.get(dkey) == self.epoch:
            return None
        units, gpus = demand.units, demand.gpus
        best: Found | None = None
        for group in self.groups.values():
            if gpus and group.maxfree < units:
                continue
            found = group.cache.get(dkey, _MISSING)
            if found is _MISSING:
                found = self._score(group, demand)
                group.cache[dkey] = found
            if found is None:
                continue
            assert isinstance(found, tuple)
            if best is None or found[0] < best[0]:
                best = found
        if best is None:
            # Capacity only shrinks until something is released: remember the failure
            # (not one seen with nodes set aside, which may hold the demand).
            if not self._excluded:
                self._failed[dkey] = self.epoch
            return None
        node = self.nodes[best[1]]
        return best[0], node.idx, self._pick_gpus(node, demand, best[2]), best[2]

    def _pick_gpus(self, node: _Node, demand: Demand, state: int | None) -> tuple[int, ...]:
        if demand.gpus == 0:
            return ()
        if state is not None:
            return (node.gpus.index(state),)
        full = self.cap << STATE_SHIFT
        return tuple([i for i, s in enumerate(node.gpus) if s == full][: demand.gpus])

    def choice_node(self, choice: Choice) -> str:
        return self.nodes[choice[1]].spec.name

    def exclude(self, node: str) -> None:
        """Set a node aside: ``find`` ignores it until :meth:`include`."""
        found = self.by_name.get(node)
        if found is not None:
            self._excluded.add(found.idx)
            self._ungroup(found)

    def include(self, node: str) -> None:
        found = self.by_name.get(node)
        if found is not None and found.idx in self._excluded:
            self._excluded.discard(found.idx)
            self._regroup(found)

    # --- topology --------------------------------------------------------------------
    def _room(self, node: _Node, demand: Demand) -> int | None:
        """The free units left on the node after one replica, or None if it does not fit."""
        if node.idx in self._excluded or node.cpu < demand.cpu_milli:
            return None
        if node.mem < demand.memory_mib:
            return None
        free = sum(s >> STATE_SHIFT for s in node.gpus)
        if demand.gpus == 0:
            return free
        if demand.units >= self.cap:
            full = self.cap << STATE_SHIFT
            fits = sum(1 for s in node.gpus if s == full) >= demand.gpus
        else:
            fits = any(
                (s >> STATE_SHIFT) >= demand.units and (s & VGPU_MASK) < self.split
                for s in node.gpus
            )
        return free - demand.units * demand.gpus if fits else None

    def place_in_domain(
        self, demand: Demand, replicas: int, ask: TopologyAsk | None
    ) -> tuple[ReplicaPlacement, ...] | None:
        """A gang inside one topology domain: the narrowest level where a domain holds it
        (up to the asked level, else up to the widest), the domain with the fewest nodes
        that could take a replica (the smallest that fits, so larger ones stay whole), in it
        the nodes left fullest. None when no domain holds it (or the pool has no topology)."""
        levels = self.topology.levels
        if replicas < 2 or not levels:
            return None
        widest = 0
        if ask is not None:
            if ask.level not in levels:
                return None
            widest = levels.index(ask.level)
        key = (demand.units, demand.gpus, demand.cpu_milli, demand.memory_mib, replicas, widest)
        if self._domain_failed.get(key) == self.epoch:
            return None
        for level in range(len(levels) - 1, widest - 1, -1):
            best: tuple[tuple[int, tuple[str, ...]], list[tuple[int, int]]] | None = None
            for domain, members in self.topology.domains[level].items():
                if len(members) < replicas:
                    continue
                fit = []
                for idx in members:
                    room = self._room(self.nodes[idx], demand)
                    if room is not None:
                        fit.append((room, idx))
                if len(fit) < replicas:
                    continue
                rank = (len(fit), domain)
                if best is None or rank < best[0]:
                    best = (rank, fit)
            if best is not None:
                chosen = sorted(best[1])[:replicas]
                return tuple(
                    self.commit(
                        ((0.0,), idx, self._pick_gpus(self.nodes[idx], demand, None), None),
                        demand,
                    )
                    if demand.units >= self.cap or demand.gpus == 0
                    else self._commit_fraction(idx, demand)
                    for _room, idx in chosen
                )
        if not self._excluded:
            self._domain_failed[key] = self.epoch
        return None

    def _commit_fraction(self, idx: int, demand: Demand) -> ReplicaPlacement:
        node = self.nodes[idx]
        state = max(
            s
            for s in node.gpus
            if (s >> STATE_SHIFT) >= demand.units and (s & VGPU_MASK) < self.split
        )
        return self.commit(((0.0,), idx, (node.gpus.index(state),), state), demand)

    # --- changes -----------------------------------------------------------------------
    def place(self, demand: Demand) -> ReplicaPlacement | None:
        found = self.find(demand)
        return None if found is None else self.commit(found, demand)

    def commit(self, choice: Choice, demand: Demand) -> ReplicaPlacement:
        _score, idx, gpus, _state = choice
        replica = ReplicaPlacement(
            node=self.nodes[idx].spec.name, gpus=gpus, units=demand.units if gpus else 0
        )
        self.take(replica, demand.cpu_milli, demand.memory_mib)
        return replica

    def take(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None:
        """Charge a placement (also one made before this cycle). Never below zero."""
        node = self.by_name.get(replica.node)
        if node is None:
            return
        for g in replica.gpus:
            if 0 <= g < len(node.gpus):
                state = node.gpus[g]
                free = max(0, (state >> STATE_SHIFT) - replica.units)
                vgpus = min(VGPU_MASK, (state & VGPU_MASK) + self.vgpu_step)
                node.gpus[g] = (free << STATE_SHIFT) | vgpus
        node.cpu = max(0, node.cpu - cpu_milli)
        node.mem = max(0, node.mem - memory_mib)
        self._regroup(node)

    def release(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None:
        node = self.by_name.get(replica.node)
        if node is None:
            return
        down = node.spec.down_gpus
        for g in replica.gpus:
            if 0 <= g < len(node.gpus) and g not in down:  # a faulty GPU frees nothing
                state = node.gpus[g]
                free = min(self.cap, (state >> STATE_SHIFT) + replica.units)
                vgpus = max(0, (state & VGPU_MASK) - self.vgpu_step)
                node.gpus[g] = (free << STATE_SHIFT) | vgpus
        node.cpu = min(node.spec.cpu_milli, node.cpu + cpu_milli)
        node.mem = min(node.spec.memory_mib, node.mem + memory_mib)
        self.epoch += 1
        self._regroup(node)

    # --- views for tests and reports -----------------------------------------------------
    def gpu_free_units(self) -> dict[str, list[int]]:
        return {n.spec.name: [s >> STATE_SHIFT for s in n.gpus] for n in self.nodes}

    def node_free_units(self, name: str) -> list[int]:
        """The free units of each GPU of one node (none for a node the pool does not have)."""
        node = self.by_name.get(name)
        return [] if node is None else [s >> STATE_SHIFT for s in node.gpus]

    def gpu_vgpus(self) -> dict[str, list[int]]:
        return {n.spec.name: [s & VGPU_MASK for s in n.gpus] for n in self.nodes}


class MigPool:
    """MIG GPUs: each GPU is partitioned into the node's layout of instances."""

    def __init__(self, gpu_class: GpuClassSpec, cluster: str, nodes: Sequence[NodeSpec]) -> None:
        self.gpu_class = gpu_class
        self.cluster = cluster
        self.epoch = 0
        self.specs = sorted(nodes, key=lambda n: n.name)
        self.by_name = {n.name: n for n in self.specs}
        self.cpu = {n.name: n.cpu_milli for n in self.specs}
        self.mem = {n.name: n.memory_mib for n in self.specs}
        # node → per GPU → per instance slot: free?
        # A GPU that failed its health check has no free instance.
        self.free: dict[str, list[list[bool]]] = {
            n.name: [[g not in n.down_gpus] * len(n.mig_layout) for g in range(n.gpu_count)]
            for n in self.specs
        }
        self._failed: dict[tuple[str | None, int, int], int] = {}
        self._excluded: set[str] = set()
        # node → profile → its best free instance (score, gpu, slot), recomputed on change.
        self._best: dict[str, dict[str, tuple[tuple[int, int], int, int] | None]] = {}
        self._max_gpus = max((n.gpu_count for n in self.specs), default=0)
        self._index = {n.name: i for i, n in enumerate(self.specs)}
        # profile → heap of (GPU free, node free, node index): the nodes' best instances in
        # find's order; entries whose node changed since are dropped when they surface.
        self._heaps: dict[str, list[tuple[int, int, int]]] = {}
        self._pushed: dict[str, dict[int, tuple[int, int] | None]] = {}
        self._changed: dict[str, set[int]] = {}

    def capacity_milli(self) -> int:
        return sum(n.gpu_count for n in self.specs) * 1000

    def _node_best(self, spec: NodeSpec, profile: str) -> tuple[tuple[int, int], int, int] | None:
        cached = self._best.setdefault(spec.name, {})
        if profile in cached:
            return cached[profile]
        gpus = self.free[spec.name]
        node_free = sum(sum(1 for f in g if f) for g in gpus)
        best: tuple[tuple[int, int], int, int] | None = None
        for g, slots in enumerate(gpus):
            for slot, name in enumerate(spec.mig_layout):
                if slots[slot] and name == profile:
                    # Fullest GPU first, then fullest node: keeps whole GPUs' layouts free.
                    score = (sum(1 for f in slots if f), node_free)
                    if best is None or score < best[0]:
                        best = (score, g, slot)
                    break
        cached[profile] = best
        return best

    def _slices(self, profile: str) -> int:
        match = catalog_core.MIG_PROFILE_RE.match(profile)
        return int(match.group("slices")) if match else 1

    def free_milli(self) -> int:
        total = 0
        for spec in self.specs:
            slices = [self._slices(p) for p in spec.mig_layout]
            whole = sum(slices) or 1
            for gpu in self.free[spec.name]:
                total += 1000 * sum(s for s, f in zip(slices, gpu, strict=True) if f) // whole
        return total

    def max_gpus_per_node(self) -> int:
        return self._max_gpus

    def node_count(self) -> int:
        return len(self.specs)

    def _heap(self, profile: str) -> list[tuple[int, int, int]]:
        """The profile's heap, brought up to the nodes changed since it was last used."""
        heap = self._heaps.get(profile)
        pushed = self._pushed.setdefault(profile, {})
        if heap is None:
            heap = []
            for idx, spec in enumerate(self.specs):
                found = self._node_best(spec, profile)
                pushed[idx] = found[0] if found is not None else None
                if found is not None:
                    heap.append((*found[0], idx))
            heapq.heapify(heap)
            self._heaps[profile] = heap
            self._changed[profile] = set()
            return heap
        for idx in self._changed[profile]:
            found = self._node_best(self.specs[idx], profile)
            score = found[0] if found is not None else None
            if score != pushed.get(idx):
                pushed[idx] = score
                if score is not None:
                    heapq.heappush(heap, (*score, idx))
        self._changed[profile].clear()
        return heap

    def find(self, demand: Demand) -> Choice | None:
        """The node whose best free instance of the profile is on the fullest GPU, then the
        fullest node, then the first by name, among the nodes with the CPU and memory; one
        heap per profile, so a find costs the nodes it passes over, not every node."""
        dkey = (demand.mig_profile, demand.cpu_milli, demand.memory_mib)
        if self._failed.get(dkey) == self.epoch:
            return None
        profile = demand.mig_profile or ""
        heap = self._heap(profile)
        pushed = self._pushed[profile]
        passed: list[tuple[int, int, int]] = []
        best: tuple[tuple[int, int, int, int, int], int, int, int] | None = None
        while heap:
            gpu_free, node_free, idx = heap[0]
            if pushed.get(idx) != (gpu_free, node_free):
                heapq.heappop(heap)  # the node changed since: its current entry is also in
                continue
            spec = self.specs[idx]
            if (
                spec.name in self._excluded
                or self.cpu[spec.name] < demand.cpu_milli
                or self.mem[spec.name] < demand.memory_mib
            ):
                passed.append(heapq.heappop(heap))
                continue
            found = self._node_best(spec, profile)
            assert found is not None
            _score, g, slot = found
            best = ((gpu_free, node_free, idx, g, slot), idx, g, slot)
            break
        for entry in passed:
            heapq.heappush(heap, entry)
        if best is None:
            if not self._excluded:
                self._failed[dkey] = self.epoch
            return None
        return tuple(float(x) for x in best[0]), best[1], (best[2],), best[3]

    def choice_node(self, choice: Choice) -> str:
        return self.specs[choice[1]].name

    def place_in_domain(
        self, demand: Demand, replicas: int, ask: TopologyAsk | None
    ) -> tuple[ReplicaPlacement, ...] | None:
        """MIG gangs are placed without regard to topology."""
        return None

    def exclude(self, node: str) -> None:
        if node in self.by_name:
            self._excluded.add(node)

    def include(self, node: str) -> None:
        self._excluded.discard(node)

    def place(self, demand: Demand) -> ReplicaPlacement | None:
        found = self.find(demand)
        return None if found is None else self.commit(found, demand)

    def commit(self, choice: Choice, demand: Demand) -> ReplicaPlacement:
        _score, idx, gpus, slot = choice
        replica = ReplicaPlacement(
            node=self.specs[idx].name,
            gpus=gpus,
            units=0,
            mig_profile=demand.mig_profile,
            mig_slot=slot,
        )
        self.take(replica, demand.cpu_milli, demand.memory_mib)
        return replica

    def _set(self, replica: ReplicaPlacement, free: bool) -> None:
        self._best.pop(replica.node, None)
        idx = self._index.get(replica.node)
        if idx is not None:
            for changed in self._changed.values():
                changed.add(idx)
        gpus = self.free.get(replica.node)
        if gpus is None or replica.mig_slot is None:
            return
        down = self.by_name[replica.node].down_gpus
        for g in replica.gpus:
            if 0 <= g < len(gpus) and 0 <= replica.mig_slot < len(gpus[g]):
                gpus[g][replica.mig_slot] = free and g not in down

    def take(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None:
        if replica.node not in self.by_name:
            return
        self._set(replica, False)
        self.cpu[replica.node] = max(0, self.cpu[replica.node] - cpu_milli)
        self.mem[replica.node] = max(0, self.mem[replica.node] - memory_mib)

    def release(self, replica: ReplicaPlacement, cpu_milli: int, memory_mib: int) -> None:
        spec = self.by_name.get(replica.node)
        if spec is None:
            return
        self._set(replica, True)
        self.cpu[replica.node] = min(spec.cpu_milli, self.cpu[replica.node] + cpu_milli)
        self.mem[replica.node] = min(spec.memory_mib, self.mem[replica.node] + memory_mib)
        self.epoch += 1


def fitting_nodes(pool: Pool, demand: Demand, limit: int) -> list[Choice]:
    """Up to ``limit`` choices for one replica each, on pairwise distinct nodes, best first.

    Nothing is taken: each found node is set aside so the next search looks elsewhere, and
    all are put back before returning. Nodes are independent, so this finds ``limit``
    choices whenever ``limit`` nodes could each hold one replica.
    """
    choices: list[Choice] = []
    aside: list[str] = []
    try:
        while len(choices) < limit:
            choice = pool.find(demand)
            if choice is None:
                break
            choices.append(choice)
            node = pool.choice_node(choice)
            pool.exclude(node)
            aside.append(node)
    finally:
        for node in aside:
            pool.include(node)
    return choices


def place_gang(
    pool: Pool, demand: Demand, replicas: int, ask: TopologyAsk | None = None
) -> tuple[ReplicaPlacement, ...] | None:
    """All replicas in ``pool``, each on a different node, or none (nothing is taken).

    Where the nodes carry topology a gang goes inside one domain if one holds it (the
    narrowest level first, :meth:`GpuPool.place_in_domain`); an ask ``required`` at a level
    is placed there or not at all, otherwise the gang spreads over the best nodes."""
    placed = pool.place_in_domain(demand, replicas, ask)
    if placed is not None:
        return placed
    if ask is not None and ask.required:
        return None
    choices = fitting_nodes(pool, demand, replicas)
    if len(choices) < replicas:
        return None
    return tuple(pool.commit(choice, demand) for choice in choices)


def build_pools(
    classes: Sequence[GpuClassSpec],
    nodes: Sequence[NodeSpec],
    typical: dict[str, tuple[TypicalRequest, ...]],
) -> dict[str, list[Pool]]:
    """One pool per (class, cluster), clusters in name order."""
    by_class = {c.name: c for c in classes}
    grouped: dict[tuple[str, str], list[NodeSpec]] = defaultdict(list)
    for node in nodes:
        if node.gpu_class in by_class and node.gpu_count > 0:
            grouped[(node.gpu_class, node.cluster)].append(node)
    pools: dict[str, list[Pool]] = defaultdict(list)
    for (class_name, cluster), members in sorted(grouped.items()):
        gpu_class = by_class[class_name]
        if gpu_class.sharing_mode == catalog_core.SHARING_MIG:
            pools[class_name].append(MigPool(gpu_class, cluster, members))
        else:
            model = FragModel(
                typical.get(class_name) or default_typical(), units_per_gpu(gpu_class)
            )
            pools[class_name].append(GpuPool(gpu_class, cluster, members, model))
    return dict(pools)


def _cpu_free(pool: Pool) -> int:
    """A pool's free CPU (milli), for the choice of a pool for demand of no GPU."""
    if isinstance(pool, GpuPool):
        return sum(n.cpu for n in pool.nodes)
    if isinstance(pool, MigPool):
        return sum(pool.cpu.values())
    return 0


class PoolChooser:
    """Which pool serves a replica that several pools could serve (a request free of GPU
    model, as the trace's pods without a gpu_spec, or bound to a few models). Pure, one
    cycle or one simulation.

    Within a pool the pool's own score decides; across pools the score compares too
    (fragment growth, then best fit), with what a choice costs other demand added (see
    ``_rank``). One rule comes first: demand that may go elsewhere stays off the capacity that
    demand bound to a pool will need. The need is learned online from the requests seen so
    far (nothing is known of those to come): each pool's *bound share* is the GPU demand seen
    that only it (or a few pools with it) may serve, over all GPU demand seen — a request
    bound to several pools split over them by capacity. Its *reserve* is the bound demand
    expected by the time arrived demand fills the cluster (bound share × the cluster's
    capacity, at most the pool's capacity), less what bound demand already took there, and
    its *scarcity* the reserve over its capacity. A replica goes to the pools it may use
    where it fits beside the reserve, the scarcer ones costing more; only when none has room
    does it take reserved capacity, so a replica bound to one model still gets it, and no
    replica is refused while one of its pools could hold it. Without bound demand nothing is
    reserved. Found on the Alibaba trace family with a third of the pods bound to a model:
    free pods packed onto the scarce models' nodes first left the pods bound to those models
    nowhere to go (bench/README.md). Cost: one pass over the pools per request."""

    def __init__(
        self,
        pools: Mapping[str, Pool],
        *,
        order: Mapping[str, int] | None = None,
        reserve: bool = True,
    ) -> None:
        self.pools = dict(pools)
        self.order = order
        self.reserving = reserve
        self.capacity = {name: p.capacity_milli() for name, p in self.pools.items()}
        self.total = sum(self.capacity.values())
        self.free = {name: p.free_milli() for name, p in self.pools.items()}
        self.cpu = {name: _cpu_free(p) for name, p in self.pools.items()}
        self.seen = 0  # GPU milli of every request seen
        self.seen_bound: dict[str, float] = defaultdict(float)  # of those bound, per pool
        self.taken_bound: dict[str, float] = defaultdict(float)  # bound milli placed, per pool

    def observe(self, milli: int, allowed: frozenset[str] | None) -> None:
        """Count one request's GPU demand into the bound shares."""
        if milli <= 0 or not self.reserving:
            return
        self.seen += milli
        if allowed is None:
            return
        named = [p for p in allowed if self.capacity.get(p, 0) > 0]
        weight = sum(self.capacity[p] for p in named)
        for p in named:
            self.seen_bound[p] += milli * self.capacity[p] / weight

    def reserve(self, name: str) -> float:
        """The room kept in ``name`` for bound demand still expected."""
        if not self.seen:
            return 0.0
        expected = min(float(self.capacity[name]), self.seen_bound[name] / self.seen * self.total)
        return max(0.0, expected - self.taken_bound[name])

    def _key(self, name: str, choice: Choice) -> tuple[float, ...]:
        score = choice[0]
        node = self.pools[name].choice_node(choice)
        tie = float(self.order[node]) if self.order is not None else score[-1]
        return (*score[:-1], tie)

    def _rank(
        self,
        name: str,
        choice: Choice,
        demand: Demand,
        milli: int,
        allowed: frozenset[str] | None,
    ) -> tuple[float, ...]:
        """The pool's score of its choice, lower better, with what the choice costs others:

        * GPU demand: whole points off the squashed fragment score for the pool's scarcity
          (``SCARCITY_POINTS`` × its reserve ÷ its capacity) and for CPU it would strand
          (``BALANCE_POINTS`` × how far the replica's CPU per GPU milli exceeds what the pool
          has free per free GPU milli, as a share of the replica's);
        * demand of no GPU, free of model: the pools with the most free CPU per free GPU
          first (powers of two), where its CPU strands the fewest GPUs."""
        key = self._key(name, choice)
        if milli > 0:
            scarcity = self.reserve(name) / self.capacity[name]
            strand = 0.0
            if demand.cpu_milli:
                pool_ratio = self.cpu[name] / max(1, self.free[name])
                strand = max(0.0, 1.0 - pool_ratio * milli / demand.cpu_milli)
            penalty = int(SCARCITY_POINTS * scarcity + BALANCE_POINTS * strand)
            return (key[0] + penalty, *key[1:])
        if allowed is None:
            ratio = self.cpu[name] / (self.free[name] + 1000)
            return (-float(int(math.log2(max(ratio, 1.0)))), *key)
        return key

    def place(
        self, demand: Demand, milli: int, allowed: frozenset[str] | None = None
    ) -> tuple[str, ReplicaPlacement] | None:
        """Place one replica of ``milli`` GPU milli on the best pool it may use, or None."""
        self.observe(milli, allowed)
        best: tuple[tuple[float, ...], str, Choice] | None = None
        spill: tuple[tuple[float, ...], str, Choice] | None = None
        for name, pool in self.pools.items():
            if allowed is not None and name not in allowed:
                continue
            choice = pool.find(demand)
            if choice is None:
                continue
            key = self._rank(name, choice, demand, milli, allowed)
            # Demand of no GPU takes no GPU room.
            roomy = milli <= 0 or self.free[name] - self.reserve(name) >= milli
            if roomy and (best is None or key < best[0]):
                best = (key, name, choice)
            if spill is None or key < spill[0]:
                spill = (key, name, choice)
        chosen = best or spill
        if chosen is None:
            return None
        _key, name, choice = chosen
        self.free[name] -= milli
        self.cpu[name] -= demand.cpu_milli
        if allowed is not None:
            # Bound demand takes what was kept for it: the room beside the reserve is unchanged.
            self.taken_bound[name] += milli
        return name, self.pools[name].commit(choice, demand)
