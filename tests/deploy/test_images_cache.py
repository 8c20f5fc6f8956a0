"""The image builder's cache keys, layers, archives and lock (deploy/devtools/images.py), on
small trees in a temporary directory: nothing here builds an image."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from deploy.devtools import images

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def images_dir(tmp_path: Path) -> Path:
    """A copy of deploy/images/ to edit."""
    copy = tmp_path / "images"
    shutil.copytree(images.IMAGES_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_same_inputs_give_the_same_key(images_dir: Path) -> None:
    for name in images.IMAGES:
        assert images.cache_key(name, images_dir) == images.cache_key(name)  # not the path
        assert len(images.cache_key(name, images_dir)) == 64


def test_an_edited_file_changes_its_image_and_children_only(images_dir: Path) -> None:
    before = {name: images.cache_key(name, images_dir) for name in images.IMAGES}

    train = images_dir / "training" / "train.py"
    train.write_text(train.read_text() + "\n# edited\n")
    after_train = {name: images.cache_key(name, images_dir) for name in images.IMAGES}
    (images_dir / "base" / "try-write-root.sh").write_text("#!/bin/sh\necho edited\n")
    after_base = {name: images.cache_key(name, images_dir) for name in images.IMAGES}

    assert {n for n in images.IMAGES if after_train[n] != before[n]} == {"training"}
    assert {n for n in images.IMAGES if after_base[n] != after_train[n]} == {
        "base",
        "notebook",
        "training",
        "serving",
        "misbehave",
    }
    assert after_base["pause"] == before["pause"]


def test_a_mode_change_and_a_new_file_change_the_key(images_dir: Path) -> None:
    before = images.cache_key("serving", images_dir)
    (images_dir / "serving" / "corpus.txt").chmod(0o755)
    executable = images.cache_key("serving", images_dir)
    (images_dir / "serving" / "extra.txt").write_text("more\n")
    added = images.cache_key("serving", images_dir)
    pycache = images_dir / "serving" / "__pycache__"
    pycache.mkdir()
    (pycache / "serve.cpython-311.pyc").write_bytes(b"\0")

    assert len({before, executable, added}) == 3
    assert images.cache_key("serving", images_dir) == added  # bytecode is no input


def test_a_recipe_change_changes_the_key() -> None:
    changed = dict(images.IMAGES)
    changed["training"] = images.Image(
        name="training",
        parent="base",
        references=images.IMAGES["training"].references,
        steps=images.IMAGES["training"].steps,
        config={**images.IMAGES["training"].config, "User": "1001"},
    )

    assert images.cache_key("training", images=changed) != images.cache_key("training")
    assert images.cache_key("serving", images=changed) == images.cache_key("serving")


def _tree(root: Path) -> None:
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "keep").write_text("same\n")
    (root / "etc" / "change").write_text("old\n")
    (root / "etc" / "gone").write_text("bye\n")
    (root / "var" / "old").mkdir(parents=True)
    (root / "var" / "old" / "inside").write_text("x\n")
    (root / "tmp").mkdir()


def _names(layer: Path) -> list[str]:
    with tarfile.open(layer) as tar:
        return tar.getnames()


def test_a_layer_holds_what_changed_and_whiteouts_for_what_went(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root)
    before = images.snapshot(root)
    (root / "etc" / "change").write_text("new\n")
    (root / "etc" / "gone").unlink()
    shutil.rmtree(root / "var" / "old")
    (root / "opt").mkdir()
    (root / "opt" / "new").write_text("hello\n")
    (root / "opt" / "link").symlink_to("new")
    (root / "tmp" / "scratch").write_text("not kept\n")

    layer = images.write_layer(root, before, images.snapshot(root), tmp_path / "layer.tar")

    names = _names(tmp_path / "layer.tar")
    assert names == sorted(names, key=lambda n: n.split("/"))
    assert set(names) == {
        "etc",  # its entries changed: its mtime with them
        "etc/change",
        "etc/.wh.gone",
        "opt",
        "opt/link",
        "opt/new",
        "var",
        "var/.wh.old",  # the directory only, not what was in it
        "tmp",  # the directory (its mtime moved), not what is in it
    }
    assert layer.whiteouts == ["etc/gone", "var/old"]
    with tarfile.open(tmp_path / "layer.tar") as tar:
        changed = tar.extractfile("etc/change")
        assert changed is not None
        assert changed.read() == b"new\n"
        assert tar.getmember("opt/link").linkname == "new"
        assert {m.mtime for m in tar} <= {images.SOURCE_DATE_EPOCH}  # clamped


def test_a_layer_is_the_same_bytes_for_the_same_tree(tmp_path: Path) -> None:
    digests = set()
    for attempt in ("one", "two"):
        root = tmp_path / attempt
        _tree(root)
        digests.add(
            images.write_layer(root, {}, images.snapshot(root), tmp_path / f"{attempt}.tar").diff_id
        )

    assert len(digests) == 1


def test_the_archive_names_the_image_after_every_reference(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _tree(root)
    layer = images.write_layer(root, {}, images.snapshot(root), tmp_path / "layer.tar")
    config = {"architecture": "amd64", "os": "linux", "rootfs": {"diff_ids": [layer.diff_id]}}
    refs = ["gpupaas.local/x:1", "quay.io/example/x:2"]

    images._write_archive(
        tmp_path / "image.tar",
        refs,
        config,
        [(layer.diff_id, lambda: open(tmp_path / "layer.tar", "rb"), layer.size)],  # noqa: SIM115
    )

    with tarfile.open(tmp_path / "image.tar") as tar:
        manifest_file = tar.extractfile("manifest.json")
        assert manifest_file is not None
        (manifest,) = json.load(manifest_file)
        assert manifest["RepoTags"] == refs
        assert manifest["Layers"] == [f"{layer.diff_id[7:]}/layer.tar"]
        stored = tar.extractfile(manifest["Config"])
        assert stored is not None
        assert json.load(stored)["rootfs"]["diff_ids"] == [layer.diff_id]


def test_a_second_build_waits_for_the_lock_and_says_who_holds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / "locks" / "k.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from deploy.devtools.images import _locked\n"
            f"with _locked(__import__('pathlib').Path({str(lock)!r}), 'base'):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(0.5)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"

    started = time.monotonic()
    with images._locked(lock, "base"):
        waited = time.monotonic() - started

    err = capsys.readouterr().err
    assert (
        f"building base image: waiting for another build of the same image "
        f"(lock held by pid {holder.pid})" in err
    )
    assert waited > 0.2  # it had the lock only once the holder let go
    holder.wait(timeout=10)
