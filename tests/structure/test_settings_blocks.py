"""Settings come in one block per integration or concern, and base names every setting of
every block, without star-imports (CONVENTIONS.md "Settings")."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from gpupaas.settings import base, blocks

SETTINGS = Path(base.__file__).parent


def _blocks() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(blocks.__path__))


def _defined_in(module_name: str) -> set[str]:
    """The UPPER_CASE names a block assigns itself (not those it imports from another)."""
    tree = ast.parse(Path(importlib.import_module(module_name).__file__ or "").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names |= {t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()}
    return names


def test_base_names_every_setting_of_every_block_once() -> None:
    seen: dict[str, str] = {}
    for block in _blocks():
        module = f"gpupaas.settings.blocks.{block}"
        for name in _defined_in(module):
            assert name not in seen, f"{name} is set in both {seen[name]} and {block}"
            seen[name] = block
            assert getattr(base, name) is getattr(importlib.import_module(module), name), name
    assert {name for name in vars(base) if name.isupper()} == set(seen)


def test_no_star_imports_between_settings_modules() -> None:
    for path in sorted(SETTINGS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert all(alias.name != "*" for alias in node.names), path
