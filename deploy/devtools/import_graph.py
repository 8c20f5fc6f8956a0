"""Count the imports that run back up the layers, to keep the picture honest.

    python -m deploy.devtools.import_graph            # the count, and each such import
    python -m deploy.devtools.import_graph --max 3    # exit 1 when there are more than 3

The layers, top to bottom (CONVENTIONS.md "Layers"):

* between packages: wiring (``gpupaas``) → edges (``apps.web``, ``apps.api``,
  ``apps.adminsite``) → the domain apps in the order of ``DOMAIN_ORDER`` → ``apps.common``;
* inside a domain app: tasks and the app config → services → selectors → adapters and other
  I/O helpers → models → pure cores (``PURE``, the modules that decide on plain data).

An import "runs back up" when a module imports one of a higher layer: a domain app importing
an edge or a domain app above it, a selector importing a service, a model importing a
selector, a pure core importing anything but pure cores. import-linter enforces the package
order in CI (pyproject.toml); this tool also counts the module layers inside each app. Lazy
imports inside functions count the same as imports at the top of a module.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import grimp

EDGES = ("apps.web", "apps.api", "apps.adminsite")
DOMAIN_ORDER = (
    "apps.telemetry",
    "apps.orchestration",
    "apps.scheduling",
    "apps.workloads",
    "apps.quotas",
    "apps.catalog",
    "apps.accounts",
    "apps.audit",
)
PURE = frozenset(
    {
        "apps.accounts.core",
        "apps.catalog.core",
        "apps.catalog.resources",
        "apps.quotas.core",
        "apps.scheduling.core",
        "apps.scheduling.data",
        "apps.scheduling.estimate",
        "apps.scheduling.fairshare",
        "apps.scheduling.feasibility",
        "apps.scheduling.fragmentation",
        "apps.scheduling.placement",
        "apps.scheduling.preemption",
        "apps.scheduling.units",
        "apps.orchestration.manifests",
        "apps.telemetry.core",
        "apps.workloads.core",
        "apps.workloads.rules",
    }
)
# Inside a domain app, highest first.
MODULE_RANK = {
    "tasks": 5,
    "apps": 5,
    "services": 4,
    "credentials": 4,  # orchestration's services for Secrets
    "selectors": 3,
    "reads": 3,  # orchestration's reads of the cluster: selectors of what runs
    "models": 1,
}
HELPER_RANK = 2  # adapters and other I/O helpers (kube, prom, clusters, reads, …)
PURE_RANK = 0


@dataclass(frozen=True)
class Upward:
    importer: str
    imported: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} -> {self.imported}  ({self.why})"


def package_rank(module: str) -> int | None:
    """0 for the wiring, 1 for the edges, 2.. for the domain apps, then apps.common."""
    if module == "gpupaas" or module.startswith("gpupaas."):
        return 0
    for edge in EDGES:
        if module == edge or module.startswith(edge + "."):
            return 1
    for index, app in enumerate(DOMAIN_ORDER):
        if module == app or module.startswith(app + "."):
            return 2 + index
    if module.startswith("apps.common"):
        return 2 + len(DOMAIN_ORDER)
    return None


def app_of(module: str) -> str | None:
    for app in DOMAIN_ORDER:
        if module == app or module.startswith(app + "."):
            return app
    return None


def module_rank(module: str) -> int:
    if module in PURE:
        return PURE_RANK
    app = app_of(module)
    rest = module[len(app) + 1 :] if app and module != app else ""
    head = rest.split(".", 1)[0]
    return MODULE_RANK.get(head, HELPER_RANK)


def upward_imports(graph: grimp.ImportGraph) -> list[Upward]:
    found: list[Upward] = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            a, b = package_rank(importer), package_rank(imported)
            if a is None or b is None:
                continue
            details = graph.get_import_details(importer=importer, imported=imported)
            line = details[0]["line_number"] if details else 0
            if b < a:
                found.append(Upward(importer, imported, line, "package layer"))
            elif (
                a == b
                and app_of(importer) is not None
                and app_of(importer) == app_of(imported)
                and module_rank(imported) > module_rank(importer)
            ):
                found.append(Upward(importer, imported, line, "module layer in the app"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.import_graph")
    parser.add_argument("--max", type=int, default=None, help="fail above this many")
    args = parser.parse_args(argv)
    graph = grimp.build_graph("apps", "gpupaas")
    found = upward_imports(graph)
    for item in found:
        print(item)
    print(f"{len(found)} import(s) run back up the layers")
    return 1 if args.max is not None and len(found) > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
