"""Packing on the public Alibaba GPU-sharing trace (openb, 2023), as the FGD paper measures it.

Method (Weng et al., USENIX ATC'23, and their simulator): the 1,213 GPU nodes of
openb_node_list_gpu_node.csv with their CPU and memory; the pods of
openb_pod_list_default.csv shuffled with a seed, followed by ceil(1.3·n) − n pods cloned
at random from the list (workload inflation 1.3). Each pod is placed once, nothing
departs, and a pod that fits nowhere (GPU, CPU or memory) is dropped. Reported: the GPU
allocation rate (allocated GPU milli ÷ total GPU milli) when the arrived GPU demand
reaches 100% of capacity and at the end, and the unallocated GPUs at the end — as the
mean over the seeds, for our placement (apps/scheduling/placement.py) and, in the same
run, first-fit, random and best-fit.

Pods honour their gpu_spec (the GPU models they may run on: a pod bound to a model goes only
to nodes of that model). Variants, reported beside the default method in the same run:

* gpuspec: a share of the GPU pods (``--gpuspec-share``, 0.33 as in the paper's
  constrained experiments, where about a third of production GPU tasks name a model) is
  given one model drawn from the nodes' GPU distribution (among the models with nodes
  large enough for the pod), before inflation, so clones keep it;
* demand: inflation by arrived GPU demand instead of a pod count: cloned pods arrive until
  the GPU they ask for reaches ``--demand-multiple`` (1.3) times the capacity, so a trace
  of smaller requests still fills the cluster.

    .venv/bin/python bench/scheduling_trace_bench.py [--data DIR] [--seeds 5] [--jobs 2]
                                                     [--variants default,gpuspec,demand,both]
                                                     [--pods FILE[,FILE...]]

--pods adds pod lists of the trace family found in DIR (openb_pod_list_gpuspec33.csv, with
its own gpu_spec column; gpushare100, multigpu50, cpu050, ...), each run as it is (count
inflation) and inflated by demand; the synthesized variants need openb_pod_list_default.csv.

DIR defaults to $GPUPAAS_TRACE_DIR or ../shared/data/alibaba-gpu-v2023 from the repo root.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from apps.scheduling.data import GpuClassSpec, NodeSpec  # noqa: E402
from apps.scheduling.fragmentation import FragModel, typical_from_requests  # noqa: E402
from apps.scheduling.placement import GpuPool, PoolChooser  # noqa: E402
from apps.scheduling.units import Demand  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "alibaba-gpu-v2023"
INFLATION = 1.3
DEFAULT_PODS = "openb_pod_list_default.csv"
VARIANTS = (
    "default",
    "gpuspec",
    "demand",
    "both",
    "skewed",
    "skewed-demand",
    "shared",
    "shared-gpuspec",
    "shared-skewed",
)
POLICIES = ("ours (FGD)", "ours (no reserve)", "best-fit", "first-fit", "random")
PUBLISHED = {  # FGD paper, same trace and method: (at 100% arrived, at the end)
    "ours (FGD)": ("FGD", 95.2, 95.4),
    "best-fit": ("best-fit", 92.9, 93.1),
    "random": ("random", 86.3, 87.5),
}
MAX_CPU = 128_000  # best-fit normalisation: 128 cores
MAX_GPU = 8_000  # and 8 GPUs


@dataclass(frozen=True)
class Pod:
    cpu: int
    mem: int
    num_gpu: int
    gpu_milli: int
    models: frozenset[str] | None = None  # the GPU models it may run on (None: any)

    @property
    def gpu_total(self) -> int:
        return self.num_gpu * self.gpu_milli if self.num_gpu else 0


@dataclass(frozen=True)
class Variant:
    name: str
    gpuspec_share: float = 0.0
    demand_multiple: float | None = None
    # How a constrained pod's model is drawn: "capacity" (weighted by the models' GPUs) or
    # "uniform" (every fitting model alike: constrained demand out of proportion to capacity,
    # so the small models are scarce, as a trace's own gpu_spec column may make them).
    draw: str = "capacity"
    shared: bool = False  # every GPU pod a sharing one (the family's gpushare100 trace)
    pods: str = DEFAULT_PODS  # the pod list, in the data folder


@dataclass(frozen=True)
class RunResult:
    variant: str
    policy: str
    seed: int
    at_full: float
    at_end: float
    unallocated_gpus: float
    dropped: int
    seconds: float


def models_of(data: Path) -> dict[str, str]:
    """Node name → GPU model."""
    with (data / "openb_node_list_gpu_node.csv").open() as f:
        return {row["sn"]: row["model"] for row in csv.DictReader(f)}


def parse_spec(value: str) -> frozenset[str] | None:
    models = frozenset(m.strip() for m in value.split("|") if m.strip() not in {"", "nan"})
    return models or None


def load(data: Path, pod_list: str = DEFAULT_PODS) -> tuple[list[NodeSpec], list[Pod]]:
    with (data / "openb_node_list_gpu_node.csv").open() as f:
        nodes = [
            NodeSpec(
                name=row["sn"],
                cluster="openb",
                gpu_class="openb",
                gpu_count=int(row["gpu"]),
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
            )
            for row in csv.DictReader(f)
        ]
    with (data / pod_list).open() as f:
        pods = [
            Pod(
                int(row["cpu_milli"]),
                int(row["memory_mib"]),
                int(row["num_gpu"]),
                int(row["gpu_milli"]) if int(row["num_gpu"]) else 0,
                parse_spec(row.get("gpu_spec") or ""),
            )
            for row in csv.DictReader(f)
        ]
    return nodes, pods


def all_shared(pods: list[Pod], seed: int) -> list[Pod]:
    """The trace family's all-shared list (gpushare100): as many pods, each GPU pod replaced
    by one drawn with the seed from the trace's GPU-sharing pods (one GPU, under 1000 milli);
    CPU-only pods kept."""
    rng = random.Random(seed * 15485863 + 5)  # noqa: S311 - reproducible
    sharing = [p for p in pods if p.num_gpu == 1 and p.gpu_milli < 1000]
    return [rng.choice(sharing) if p.num_gpu else p for p in pods]


def constrain(
    pods: list[Pod],
    nodes: list[NodeSpec],
    models: dict[str, str],
    share: float,
    seed: int,
    draw: str = "capacity",
) -> list[Pod]:
    """Give ``share`` of the GPU pods without a gpu_spec one model, drawn from the nodes' GPU
    distribution (``draw="uniform"``: every model alike) among the models that have a node
    with enough GPUs for the pod."""
    rng = random.Random(seed * 104729 + 3)  # noqa: S311 - reproducible
    gpus_of: dict[str, int] = {}
    largest: dict[str, int] = {}
    for node in nodes:
        model = models[node.name]
        gpus_of[model] = gpus_of.get(model, 0) + node.gpu_count
        largest[model] = max(largest.get(model, 0), node.gpu_count)
    out = []
    for pod in pods:
        if pod.num_gpu and pod.models is None and rng.random() < share:
            fitting = [m for m in sorted(gpus_of) if largest[m] >= pod.num_gpu]
            weights = [gpus_of[m] if draw == "capacity" else 1 for m in fitting]
            model = rng.choices(fitting, weights)[0]
            pod = Pod(pod.cpu, pod.mem, pod.num_gpu, pod.gpu_milli, frozenset({model}))
        out.append(pod)
    return out


def workload(
    pods: list[Pod], seed: int, capacity: int = 0, demand_multiple: float | None = None
) -> list[Pod]:
    rng = random.Random(seed)  # noqa: S311 - a reproducible shuffle, not a secret
    order = list(pods)
    rng.shuffle(order)
    if demand_multiple is None:
        extra = math.ceil(INFLATION * len(pods)) - len(pods)
        return order + [rng.choice(pods) for _ in range(extra)]
    # Clones arrive until the GPU demand reaches the multiple of capacity.
    demand = sum(p.gpu_total for p in order)
    while demand < demand_multiple * capacity:
        pod = rng.choice(pods)
        order.append(pod)
        demand += pod.gpu_total
    return order


class Baseline:
    """First-fit, random and best-fit over plain lists (the comparison policies)."""

    def __init__(
        self, nodes: list[NodeSpec], policy: str, seed: int, models: dict[str, str]
    ) -> None:
        self.policy = policy
        self.model = [models[n.name] for n in nodes]
        self.rng = random.Random(seed * 7919 + 1)  # noqa: S311 - reproducible
        self.cpu = [n.cpu_milli for n in nodes]
        self.mem = [n.memory_mib for n in nodes]
        self.gpus = [[1000] * n.gpu_count for n in nodes]
        self.maxfree = [1000 if n.gpu_count else 0 for n in nodes]
        self.nfull = [n.gpu_count for n in nodes]
        self.free = [1000 * n.gpu_count for n in nodes]

    def _fits(self, i: int, pod: Pod) -> bool:
        if self.cpu[i] < pod.cpu or self.mem[i] < pod.mem:
            return False
        if pod.models is not None and self.model[i] not in pod.models:
            return False
        if pod.num_gpu == 0:
            return True
        if pod.num_gpu == 1 and pod.gpu_milli < 1000:
            return self.maxfree[i] >= pod.gpu_milli
        return self.nfull[i] >= pod.num_gpu

    def place(self, pod: Pod) -> bool:
        n = len(self.cpu)
        fits = self._fits
        if self.policy == "first-fit":
            chosen = next((i for i in range(n) if fits(i, pod)), None)
        elif self.policy == "random":
            feasible = [i for i in range(n) if fits(i, pod)]
            chosen = self.rng.choice(feasible) if feasible else None
        else:  # best-fit: lowest 0.5·(cpu left)/128 cores + 0.5·(GPU left)/8 GPUs
            chosen, best = None, math.inf
            demand = pod.gpu_total
            for i in range(n):
                if fits(i, pod):
                    score = (
                        0.5 * (self.cpu[i] - pod.cpu) / MAX_CPU
                        + 0.5 * (self.free[i] - demand) / MAX_GPU
                    )
                    if score < best:
                        chosen, best = i, score
        if chosen is None:
            return False
        self._take(chosen, pod)
        return True

    def _take(self, i: int, pod: Pod) -> None:
        gpus = self.gpus[i]
        if pod.num_gpu == 1 and pod.gpu_milli < 1000:
            fitting = [g for g, free in enumerate(gpus) if free >= pod.gpu_milli]
            if self.policy == "first-fit":
                g = fitting[0]
            elif self.policy == "random":
                g = self.rng.choice(fitting)
            else:  # the fullest GPU that fits
                g = min(fitting, key=lambda k: (gpus[k], k))
            gpus[g] -= pod.gpu_milli
        elif pod.num_gpu:
            full = [g for g, free in enumerate(gpus) if free == 1000]
            chosen = self.rng.sample(full, pod.num_gpu) if self.policy == "random" else full
            for g in chosen[: pod.num_gpu]:
                gpus[g] = 0
        self.cpu[i] -= pod.cpu
        self.mem[i] -= pod.mem
        self.maxfree[i] = max(gpus, default=0)
        self.nfull[i] = sum(1 for free in gpus if free == 1000)
        self.free[i] = sum(gpus)


class Ours:
    """Our placement: the scheduler's GPU pool with fragmentation-aware scoring, one pool per
    GPU model (as the platform has a pool per GPU class), and across pools the
    ``PoolChooser``: a pod bound to models only looks at theirs, and every pod takes the best
    choice over the pools that have room beside what the bound pods are expected to need
    (learned from the pods arrived so far, not from the file), and reserved room only when
    nothing else fits."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        pods: list[Pod],
        models: dict[str, str],
        *,
        reserve: bool = True,
    ) -> None:
        # The trace's GPUs share by milli-GPU with no vGPU count limit: HAMi without a split.
        gpu_class = GpuClassSpec(name="openb", sharing_mode="hami", memory_mib=16384)
        typical = typical_from_requests((min(p.gpu_milli, 1000), p.num_gpu, p.cpu) for p in pods)
        frag = FragModel(typical, 1000)
        by_model: dict[str, list[NodeSpec]] = {}
        for node in nodes:
            by_model.setdefault(models[node.name], []).append(node)
        pools = {m: GpuPool(gpu_class, "openb", ns, frag) for m, ns in by_model.items()}
        # The best-fit part of the score normalised over the whole cluster, so that choices
        # of different pools compare (each pool would otherwise normalise by its own nodes).
        cpu_norm = 0.5 / max(n.cpu_milli for n in nodes)
        units_norm = 0.5 / (1000 * max(n.gpu_count for n in nodes))
        for pool in pools.values():
            pool._cpu_norm = cpu_norm  # the cross-pool comparison
            pool._units_norm = units_norm
        # Ties to the node's place in the file, as one pool has.
        order = {n.name: i for i, n in enumerate(nodes)}
        self.chooser = PoolChooser(pools, order=order, reserve=reserve)

    def place(self, pod: Pod) -> bool:
        if pod.num_gpu == 0:
            demand = Demand(0, 0, pod.cpu, pod.mem)
        elif pod.num_gpu == 1 and pod.gpu_milli < 1000:
            demand = Demand(pod.gpu_milli, 1, pod.cpu, pod.mem)
        else:
            demand = Demand(1000, pod.num_gpu, pod.cpu, pod.mem)
        return self.chooser.place(demand, pod.gpu_total, pod.models) is not None


DEFAULT_VARIANT = Variant("default")


def run(data: Path, policy: str, seed: int, variant: Variant = DEFAULT_VARIANT) -> RunResult:
    nodes, pods = load(data, variant.pods)
    models = models_of(data)
    capacity = 1000 * sum(n.gpu_count for n in nodes)
    if variant.shared:
        pods = all_shared(pods, seed)
    if variant.gpuspec_share:
        pods = constrain(pods, nodes, models, variant.gpuspec_share, seed, variant.draw)
    arrivals = workload(pods, seed, capacity, variant.demand_multiple)
    started = time.perf_counter()
    placer: Ours | Baseline = (
        Ours(nodes, pods, models, reserve=policy == "ours (FGD)")
        if policy.startswith("ours")
        else Baseline(nodes, policy, seed, models)
    )
    arrived = allocated = dropped = 0
    at_full: float | None = None
    for pod in arrivals:
        arrived += pod.gpu_total
        if placer.place(pod):
            allocated += pod.gpu_total
        else:
            dropped += 1
        if at_full is None and arrived >= capacity:
            at_full = allocated / capacity
    seconds = time.perf_counter() - started
    return RunResult(
        variant=variant.name,
        policy=policy,
        seed=seed,
        at_full=100 * (at_full if at_full is not None else allocated / capacity),
        at_end=100 * allocated / capacity,
        unallocated_gpus=(capacity - allocated) / 1000,
        dropped=dropped,
        seconds=seconds,
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(os.environ.get("GPUPAAS_TRACE_DIR", DEFAULT_DATA))
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--pods", default="", help="more pod lists in DIR (comma-separated), e.g. a gpuspec one"
    )
    parser.add_argument("--gpuspec-share", type=float, default=0.33)
    parser.add_argument("--demand-multiple", type=float, default=1.3)
    args = parser.parse_args(argv)
    if not (args.data / "openb_node_list_gpu_node.csv").exists():
        print(f"trace not found in {args.data} (set --data or GPUPAAS_TRACE_DIR)")
        return 2
    share, multiple = args.gpuspec_share, args.demand_multiple
    known = {
        "default": Variant("default"),
        "gpuspec": Variant(f"gpuspec {share:.0%}", gpuspec_share=share),
        "demand": Variant(f"demand x{multiple:g}", demand_multiple=multiple),
        "both": Variant(
            f"gpuspec {share:.0%} + demand x{multiple:g}",
            gpuspec_share=share,
            demand_multiple=multiple,
        ),
        "skewed": Variant(
            f"gpuspec {share:.0%} uniform over models", gpuspec_share=share, draw="uniform"
        ),
        "skewed-demand": Variant(
            f"gpuspec {share:.0%} uniform over models + demand x{multiple:g}",
            gpuspec_share=share,
            draw="uniform",
            demand_multiple=multiple,
        ),
        "shared": Variant(
            f"all-shared + demand x{multiple:g}", shared=True, demand_multiple=multiple
        ),
        "shared-gpuspec": Variant(
            f"all-shared + gpuspec {share:.0%} + demand x{multiple:g}",
            shared=True,
            gpuspec_share=share,
            demand_multiple=multiple,
        ),
        "shared-skewed": Variant(
            f"all-shared + gpuspec {share:.0%} uniform + demand x{multiple:g}",
            shared=True,
            gpuspec_share=share,
            draw="uniform",
            demand_multiple=multiple,
        ),
    }
    # A pod list of the trace family with its own gpu_spec column (or any other list), in the
    # data folder: run as it is and inflated by demand.
    for extra in filter(None, args.pods.split(",")):
        if (args.data / extra).exists():
            known[extra] = Variant(extra, pods=extra)
            known[f"{extra}+demand"] = Variant(
                f"{extra} + demand x{multiple:g}", pods=extra, demand_multiple=multiple
            )
            args.variants += f",{extra},{extra}+demand"
        else:
            print(f"{extra}: not in {args.data}, left out")
    variants = [known[v] for v in args.variants.split(",") if v in known]
    policies = [p for p in POLICIES if p in args.policies.split(",")]
    jobs = [
        (args.data, p, s, v) for v in variants for p in policies for s in range(1, args.seeds + 1)
    ]
    started = time.perf_counter()
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as executor:
            results = list(executor.map(run, *zip(*jobs, strict=True)))
    else:
        results = [run(*job) for job in jobs]
    wall = time.perf_counter() - started
    nodes, _pods = load(args.data)
    print(
        f"Alibaba openb trace: {len(nodes)} nodes, {sum(n.gpu_count for n in nodes)} GPUs; "
        f"seeds 1..{args.seeds}; default inflation: {INFLATION} x the pod count"
    )
    for variant in variants:
        print(f"\nvariant: {variant.name}")
        header = (
            f"{'policy':<16} {'alloc@100%':>10} {'alloc@end':>10} {'unalloc GPUs':>12} "
            f"{'dropped':>8} {'s/run':>6}   published (@100% / @end)"
        )
        print(header)
        print("-" * len(header))
        means: dict[str, tuple[float, float]] = {}
        for policy in policies:
            rows = [r for r in results if r.policy == policy and r.variant == variant.name]
            full, end = _mean([r.at_full for r in rows]), _mean([r.at_end for r in rows])
            means[policy] = (full, end)
            published = PUBLISHED.get(policy) if variant.name == "default" else None
            ref = f"{published[0]}: {published[1]}% / {published[2]}%" if published else "-"
            print(
                f"{policy:<16} {full:>9.2f}% {end:>9.2f}% "
                f"{_mean([r.unallocated_gpus for r in rows]):>12.1f} "
                f"{_mean([float(r.dropped) for r in rows]):>8.0f} "
                f"{_mean([r.seconds for r in rows]):>6.2f}   {ref}"
            )
        if "ours (FGD)" in means:
            ours_full, ours_end = means["ours (FGD)"]
            for policy in policies:
                if policy != "ours (FGD)":
                    full, end = means[policy]
                    if ours_full > full and ours_end > end:
                        ahead = "ahead"
                    elif (ours_full, ours_end) == (full, end):
                        ahead = "tie: both place the same"
                    else:
                        ahead = "NOT ahead"
                    print(
                        f"ours ÷ {policy}: {ours_full / full:.3f} at 100% arrived, "
                        f"{ours_end / end:.3f} at the end ({ahead})"
                    )
    print(f"wall time {wall:.1f} s with {args.jobs} process(es)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
