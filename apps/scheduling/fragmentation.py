"""Fragmentation of a node's free GPU capacity, measured against typical requests.

After FGD (Weng et al., "Beware of Fragmentation", USENIX ATC'23): a node's free GPU
capacity is a *fragment* for a request shape if that request cannot use it — because the
node lacks the CPU for it, lacks enough GPUs with that much free, or because a GPU's free
part is smaller than the request. The fragmentation of a node is the expected fragment
over the distribution of typical requests; a placement is scored by how much it makes
that expectation grow, and the one that grows it least wins.

For a typical request (cpu, u units per GPU, k GPUs) of probability p, on a node with
free CPU c and free units f_1 … f_n per GPU:
- k = 0 (no GPU): all free GPU capacity is a fragment for it;
- c < cpu, or fewer than k GPUs with f_i ≥ u: all free GPU capacity is a fragment;
- otherwise the GPUs with f_i < u are fragments.

A node's state is reduced to (CPU level, sorted GPU states), where the CPU level counts
the typical CPU thresholds the free CPU reaches: nodes with equal reduced state have
equal fragmentation, which makes the measure cheap to memoise.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Iterable, Sequence

from apps.scheduling.data import TypicalRequest

# A GPU's state in a pool is one int: free units << STATE_SHIFT | vGPUs placed on it.
STATE_SHIFT = 8
VGPU_MASK = (1 << STATE_SHIFT) - 1


def free_of(state: int) -> int:
    return state >> STATE_SHIFT


class FragModel:
    """Expected fragment of a node state, for one pool's units and typical requests."""

    def __init__(self, typical: Iterable[TypicalRequest], units_per_gpu: int) -> None:
        self.cap = units_per_gpu
        shapes: Counter[tuple[int, int, int]] = Counter()
        total = 0.0
        for t in typical:
            if t.weight <= 0:
                continue
            if t.gpus <= 0 or t.gpu_milli <= 0:
                shape = (t.cpu_milli, 0, 0)
            elif t.gpu_milli >= 1000:
                shape = (t.cpu_milli, units_per_gpu, t.gpus)
            else:
                units = max(1, math.ceil(t.gpu_milli * units_per_gpu / 1000))
                shape = (t.cpu_milli, units, 1)
            shapes[shape] += t.weight  # type: ignore[assignment]
            total += t.weight
        if total <= 0:
            shapes = Counter({(0, units_per_gpu, 1): 1})
            total = 1.0
        self.thresholds: list[int] = sorted({cpu for (cpu, _u, k) in shapes if k > 0})
        self.cpu_only_weight = sum(w for (_c, _u, k), w in shapes.items() if k == 0) / total
        # (index of its CPU threshold, units, gpus, probability), in a fixed order.
        self.terms: list[tuple[int, int, int, float]] = [
            (self.thresholds.index(cpu), units, k, w / total)
            for (cpu, units, k), w in sorted(shapes.items())
            if k > 0
        ]
        self._memo: dict[tuple[int, tuple[int, ...]], float] = {}

    def level(self, cpu_free: int) -> int:
        """How many typical CPU thresholds ``cpu_free`` reaches."""
        return bisect_right(self.thresholds, cpu_free)

    def frag(self, level: int, states: tuple[int, ...]) -> float:
        """Expected fragment (in units) of a node: ``states`` sorted ascending."""
        key = (level, states)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        frees = [s >> STATE_SHIFT for s in states]
        total = sum(frees)
        value = self.cpu_only_weight * total
        if total:
            n = len(frees)
            for threshold, units, k, p in self.terms:
                if level <= threshold:
                    value += p * total
                    continue
                first_fit = bisect_left(frees, units)
                if n - first_fit < k:
                    value += p * total
                else:
                    value += p * sum(frees[:first_fit])
        if len(self._memo) > 500_000:
            self._memo.clear()
        self._memo[key] = value
        return value


def typical_from_requests(
    requests: Iterable[tuple[int, int, int]], *, coverage: float = 1.0
) -> tuple[TypicalRequest, ...]:
    """Typical requests from observed ones: (gpu_milli per GPU, gpus, cpu_milli) triples.

    The most frequent shapes that together cover ``coverage`` of all requests, weighted by
    frequency (the simulator of the FGD paper keeps the most popular shapes likewise).
    """
    counts: Counter[tuple[int, int, int]] = Counter(requests)
    if not counts:
        return ()
    total = sum(counts.values())
    kept: list[TypicalRequest] = []
    covered = 0
    for (milli, gpus, cpu), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if covered >= coverage * total and kept:
            break
        kept.append(TypicalRequest(gpu_milli=milli, gpus=gpus, cpu_milli=cpu, weight=float(n)))
        covered += n
    return tuple(kept)


def default_typical(cpu_milli: int = 0) -> tuple[TypicalRequest, ...]:
    """A prior for a class with no history: quarter, half and whole GPUs, and 2/4/8 GPUs."""
    return (
        TypicalRequest(250, 1, cpu_milli, 2.0),
        TypicalRequest(500, 1, cpu_milli, 2.0),
        TypicalRequest(1000, 1, cpu_milli, 3.0),
        TypicalRequest(1000, 2, cpu_milli, 1.0),
        TypicalRequest(1000, 4, cpu_milli, 1.0),
        TypicalRequest(1000, 8, cpu_milli, 1.0),
    )


def replace_state(states: Sequence[int], old: int, new: int, count: int = 1) -> tuple[int, ...]:
    """``states`` (sorted) with ``count`` occurrences of ``old`` replaced by ``new``, sorted."""
    out = list(states)
    for _ in range(count):
        out.remove(old)
    for _ in range(count):
        insort(out, new)
    return tuple(out)
