"""The layers have one definition, the import contracts in pyproject.toml: every app is in
the package order, every domain app and edge has its inside layers checked, and the picture
the development tool draws comes from those contracts, with no module left out of a layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.devtools import import_graph

ROOT = Path(__file__).resolve().parents[2]
EDGES = {"apps.web", "apps.api", "apps.adminsite"}
SHARED = {"apps.common"}


def _contracts() -> dict[str, import_graph.LayersContract]:
    return {c.id: c for c in import_graph.layers_contracts()}


def _apps() -> set[str]:
    return {f"apps.{p.parent.name}" for p in (ROOT / "apps").glob("*/__init__.py")}


def test_every_app_stands_in_the_package_order() -> None:
    ordered = {name for layer in _contracts()["packages"].layers for name in layer.names}
    assert _apps() - ordered == set()
    assert ordered - _apps() - {"gpupaas"} == set(), "the order names an app that is gone"


def test_every_domain_app_and_edge_has_its_inside_layers_checked() -> None:
    contracts = _contracts()
    assert set(contracts["inside-apps"].containers) == _apps() - EDGES - SHARED
    assert set(contracts["inside-edges"].containers) == EDGES


def test_a_layer_name_in_parentheses_is_optional() -> None:
    layer = import_graph.parse_layer("(services) : credentials")
    assert layer.names == ("services", "credentials")
    assert layer.optional == {"services"}
    assert import_graph.parse_layer("apps.web | apps.api").names == ("apps.web", "apps.api")


def test_the_picture_shows_every_app_and_leaves_no_module_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert import_graph.main(["--check"]) == 0
    drawn = capsys.readouterr().out
    assert "no layer names" not in drawn
    for app in _apps() - SHARED:
        assert f"  {app.rpartition('.')[2]} " in drawn, app
    assert "workloads " in drawn and " → models → " in drawn
