"""The Python side of kubesim: build cache keying, topology validation, start-up errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from deploy.devtools import kubesim as ks


def _fake_source(root: Path) -> Path:
    (root / "topologies").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "go.mod").write_text("module x\n\nrequire k8s.io/kubernetes v1.36.3\n")
    (root / "go.sum").write_text("")
    (root / "main.go").write_text("package main\n")
    (root / "topologies" / "default.yaml").write_text("pools: []\n")
    (root / "README.md").write_text("docs\n")
    (root / "bin" / "kubesim").write_text("binary\n")
    return root


def test_source_hash_changes_with_go_files_and_embedded_topologies_only(tmp_path: Path) -> None:
    src = _fake_source(tmp_path / "src")
    first = ks.source_hash(src)

    (src / "README.md").write_text("more docs\n")
    (src / "bin" / "kubesim").write_text("rebuilt\n")
    assert ks.source_hash(src) == first

    (src / "main.go").write_text("package main // changed\n")
    after_go = ks.source_hash(src)
    assert after_go != first

    (src / "topologies" / "default.yaml").write_text("pools: [{}]\n")
    assert ks.source_hash(src) != after_go


def test_cache_dir_follows_kubesim_cache_dir_then_xdg_cache_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBESIM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ks.cache_root() == tmp_path / "xdg" / "gpupaas" / "kubesim"

    monkeypatch.setenv("KUBESIM_CACHE_DIR", str(tmp_path / "explicit"))
    assert ks.cache_root() == tmp_path / "explicit"
    assert ks.cached_binary_path().parent.parent == tmp_path / "explicit"


def test_version_ldflags_come_from_the_pinned_kubernetes_module() -> None:
    version = ks.kubernetes_version()
    assert version.startswith("v1.")
    assert f"k8s.io/component-base/version.gitVersion={version}" in ks.build_ldflags(version)


def test_missing_go_toolchain_is_reported_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ks, "find_go", lambda: None)
    with pytest.raises(ks.ToolchainMissingError, match="Go toolchain"):
        ks.build(tmp_path / "kubesim")


@pytest.mark.kubesim
def test_binary_reports_the_kubernetes_version(kubesim_binary: Path) -> None:
    out = subprocess.run(
        [str(kubesim_binary), "version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ks.kubernetes_version()


@pytest.mark.kubesim
def test_invalid_topology_is_rejected_with_the_field_named(
    kubesim_binary: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "pools:\n"
        "  - name: l40s\n"
        "    count: 2\n"
        "    gpu: {count: 4, product: NVIDIA-L40S, memoryMiB: 46068,"
        " sharing: {mode: time-slicing}}\n"
    )

    out = subprocess.run(
        [str(kubesim_binary), "topology", "--topology", str(bad)], capture_output=True, text=True
    )

    assert out.returncode == 1
    assert "pools[0] (l40s).gpu.sharing.replicas" in out.stderr
    assert str(bad) in out.stderr


@pytest.mark.kubesim
def test_start_raises_with_the_log_tail_when_up_fails(kubesim_binary: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools: [{name: a, count: 1, gpu: {count: 1}}]\n")

    with pytest.raises(ks.KubesimError) as excinfo:
        ks.start(tmp_path / "data", topology=bad, timeout=30)

    assert "exited with 2" in str(excinfo.value)
    assert "gpu.product: required" in str(excinfo.value)
