"""What the tree itself must keep: every module that calls itself pure is held to it by the
pure import contract, and every long module says what it is for."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("apps", "gpupaas", "cli/gpupaas_cli", "deploy/devtools", "bench")
LONG = 300  # lines; a module longer than this says in its docstring what it is for
# "Pure." as a sentence of its own, or a docstring that starts with the word.
CALLS_ITSELF_PURE = re.compile(r"\A\s*Pure\b|(?<![\w-])Pure\.(?!\w)")


def _contract(contract_id: str) -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for contract in config["contracts"]:
        if contract.get("id") == contract_id:
            return dict(contract)
    raise LookupError(f"pyproject.toml has no import contract with id {contract_id!r}")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _python_files(*roots: str) -> list[Path]:
    return sorted(
        path
        for root in roots
        for path in (ROOT / root).rglob("*.py")
        if "migrations" not in path.parts and "tests" not in path.parts
    )


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _covered(module: str, listed: list[str]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in listed)


def test_the_pure_pattern_reads_docstrings_as_meant() -> None:
    assert CALLS_ITSELF_PURE.search("Pure rules for the catalog.")
    assert CALLS_ITSELF_PURE.search("What a dataset may be. Pure.\n\nMore.")
    assert CALLS_ITSELF_PURE.search("The status of a pod. Pure.")
    assert not CALLS_ITSELF_PURE.search("Reads of the pure core's answers for the portal.")
    assert not CALLS_ITSELF_PURE.search("Impure. Talks to the API.")
    assert not CALLS_ITSELF_PURE.search("Cluster errors.\n\nPure: no Django; the client's types.")


def test_every_module_that_calls_itself_pure_is_in_the_pure_contract() -> None:
    listed = list(_contract("pure")["source_modules"])  # type: ignore[call-overload]
    claims = [
        _module_name(path)
        for path in _python_files("apps")
        if CALLS_ITSELF_PURE.search(_docstring(path))
    ]
    assert claims, "no module calls itself pure: the pattern no longer matches the docstrings"
    missing = [module for module in claims if not _covered(module, listed)]
    assert not missing, (
        "These modules say they are pure but the pure contract in pyproject.toml "
        f"([[tool.importlinter.contracts]] id = 'pure') does not hold them to it: {missing}"
    )


def test_the_pure_contract_names_each_module_once() -> None:
    listed = list(_contract("pure")["source_modules"])  # type: ignore[call-overload]
    covered = [m for m in listed if _covered(m, [o for o in listed if o != m])]
    assert not covered, (
        f"already held through their package (a package covers its modules): {covered}"
    )


def test_every_module_in_the_pure_contract_sits_in_the_pure_layer_of_its_app() -> None:
    listed = list(_contract("pure")["source_modules"])  # type: ignore[call-overload]
    bottom = str(list(_contract("inside-apps")["layers"])[-1])  # type: ignore[call-overload]
    pure_layer = {name.strip().strip("()") for name in bottom.split(":")}
    outside = [module for module in listed if module.split(".")[2] not in pure_layer]
    assert not outside, f"pure modules missing from the lowest layer of 'inside-apps': {outside}"


@pytest.mark.parametrize("root", SOURCES)
def test_every_long_module_has_a_docstring(root: str) -> None:
    undocumented = []
    for path in _python_files(root):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > LONG and not _docstring(path):
            undocumented.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not undocumented, (
        f"Modules over {LONG} lines without a module docstring saying what they are for: "
        f"{undocumented}"
    )
