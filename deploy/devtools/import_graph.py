"""Draw the layers as the import contracts in pyproject.toml define them.

    python -m deploy.devtools.import_graph            # the picture
    python -m deploy.devtools.import_graph --check    # exit 1 when a module is in no layer

The contracts (``[tool.importlinter]`` in pyproject.toml) are the one definition of the
layers, and ``lint-imports`` enforces them in CI (deploy/test.sh). This tool holds no table of
its own: it reads the layers contracts and the modules that exist, and shows, top to bottom,
the package order and, for each app the contracts name as a container, which of its modules
stand in each layer (a package ends in ``/``). A module that no layer names is listed below
the picture; ``--check`` fails on it (lint-imports fails on it too where the contract is
exhaustive).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
GRAPH_PACKAGES = ("apps", "gpupaas")


@dataclass(frozen=True)
class Layer:
    names: tuple[str, ...]  # module names (containers' children: their last part)
    optional: frozenset[str]


@dataclass(frozen=True)
class LayersContract:
    id: str
    name: str
    layers: tuple[Layer, ...]
    containers: tuple[str, ...]
    ignored: frozenset[str]  # children that need no layer (exhaustive_ignores)


def parse_layer(raw: str) -> Layer:
    """One entry of a contract's ``layers``: names split by ``|`` (independent) or ``:``
    (may import each other); a name in parentheses is optional."""
    separator = "|" if "|" in raw else ":"
    names, optional = [], set()
    for part in raw.split(separator):
        name = part.strip()
        if name.startswith("(") and name.endswith(")"):
            name = name[1:-1].strip()
            optional.add(name)
        names.append(name)
    return Layer(tuple(names), frozenset(optional))


def layers_contracts(pyproject: Path = PYPROJECT) -> list[LayersContract]:
    config: dict[str, Any] = tomllib.loads(pyproject.read_text())["tool"]["importlinter"]
    return [
        LayersContract(
            id=str(c.get("id", c["name"])),
            name=str(c["name"]),
            layers=tuple(parse_layer(str(raw)) for raw in c["layers"]),
            containers=tuple(c.get("containers", ())),
            ignored=frozenset(c.get("exhaustive_ignores", ())),
        )
        for c in config["contracts"]
        if c["type"] == "layers"
    ]


def _shown(graph: grimp.ImportGraph, module: str) -> str:
    tail = module.rpartition(".")[2]
    return f"{tail}/" if graph.find_children(module) else tail


def container_rows(
    graph: grimp.ImportGraph, contract: LayersContract
) -> tuple[list[tuple[str, list[list[str]]]], list[str]]:
    """For each container, the modules present in each layer (top first); and the
    containers' modules that no layer names."""
    rows: list[tuple[str, list[list[str]]]] = []
    unnamed: list[str] = []
    named = {name for layer in contract.layers for name in layer.names}
    for container in contract.containers:
        children = sorted(graph.find_children(container))
        present = {child.rpartition(".")[2]: child for child in children}
        cells = [
            [_shown(graph, present[name]) for name in sorted(layer.names) if name in present]
            for layer in contract.layers
        ]
        rows.append((container, cells))
        unnamed.extend(
            child
            for tail, child in present.items()
            if tail not in named and tail not in contract.ignored
        )
    return rows, sorted(unnamed)


def picture(graph: grimp.ImportGraph, contracts: Iterable[LayersContract]) -> tuple[str, list[str]]:
    lines: list[str] = []
    unnamed: list[str] = []
    for contract in contracts:
        lines.append(f"{contract.name} [{contract.id}], top to bottom:")
        if not contract.containers:
            for number, layer in enumerate(contract.layers, 1):
                lines.append(f"  {number:2}  {'  '.join(layer.names)}")
        else:
            rows, missing = container_rows(graph, contract)
            unnamed.extend(missing)
            width = max(len(c.rpartition(".")[2]) for c, _ in rows)
            for container, cells in rows:
                drawn = " → ".join(", ".join(cell) for cell in cells if cell)
                lines.append(f"  {container.rpartition('.')[2]:{width}}  {drawn}")
        lines.append("")
    if unnamed:
        lines.append("Modules that no layer names (add them to a layer in pyproject.toml):")
        lines.extend(f"  {module}" for module in unnamed)
    return "\n".join(lines).rstrip() + "\n", unnamed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.import_graph")
    parser.add_argument("--check", action="store_true", help="fail when a module is in no layer")
    args = parser.parse_args(argv)
    graph = grimp.build_graph(*GRAPH_PACKAGES, cache_dir=None)
    text, unnamed = picture(graph, layers_contracts())
    sys.stdout.write(text)
    return 1 if args.check and unnamed else 0


if __name__ == "__main__":
    sys.exit(main())
