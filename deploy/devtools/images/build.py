"""Building the images: their archives (docker-archive, loadable by ``ctr images import``),
building each in order of its parents under the lock, and the command line."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from deploy.devtools.images.cache import _locked, cache_dir, cache_key, scratch_dir
from deploy.devtools.images.layers import _apply_layer, run_in_chroot, snapshot, write_layer
from deploy.devtools.images.progress import _duration, _run_logged, _step, say
from deploy.devtools.images.recipes import (
    CREATED,
    DEBIAN_SOURCES,
    IMAGES,
    PAUSE,
    SOURCE_DATE_EPOCH,
    Copy,
    Image,
    ImageError,
    Link,
    Remove,
    Run,
    Step,
)


def _arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def _merge_config(parent: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    config = dict(parent)
    for key, value in own.items():
        if key == "Env":
            env = dict(e.split("=", 1) for e in config.get("Env", []))
            env.update(value)
            config["Env"] = [f"{k}={v}" for k, v in env.items()]
        elif value is None:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def _archive_member(diff_id: str) -> str:
    return f"{diff_id.split(':', 1)[1]}/layer.tar"


def _tar_add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), SOURCE_DATE_EPOCH, 0o644
    tar.addfile(info, io.BytesIO(data))


def _write_archive(
    out: Path,
    references: Sequence[str],
    config: dict[str, Any],
    layers: Sequence[tuple[str, Opener, int]],
) -> str:
    """A ``docker save`` archive: manifest.json, the config, one directory per layer."""
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [
        {
            "Config": config_name,
            "RepoTags": list(references),
            "Layers": [_archive_member(d) for d, _, _ in layers],
        }
    ]
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        seen = set()
        for diff_id, opener, size in layers:
            if diff_id in seen:
                continue
            seen.add(diff_id)
            info = tarfile.TarInfo(_archive_member(diff_id))
            info.size, info.mtime, info.mode = size, SOURCE_DATE_EPOCH, 0o644
            with opener() as data:
                tar.addfile(info, data)
        _tar_add_bytes(tar, config_name, config_bytes)
        _tar_add_bytes(tar, "manifest.json", json.dumps(manifest, separators=(",", ":")).encode())
    return config_name


# Opens a layer's bytes (a file, or a member of a parent's archive).
Opener = Callable[[], contextlib.AbstractContextManager[IO[bytes]]]


@dataclass
class Built:
    name: str
    key: str
    directory: Path
    meta: dict[str, Any]

    @property
    def archive(self) -> Path:
        return self.directory / "image.tar"


def _load(directory: Path, name: str, key: str) -> Built | None:
    try:
        meta = json.loads((directory / "image.json").read_text())
    except (FileNotFoundError, ValueError):
        return None
    if not (directory / "image.tar").is_file():
        return None
    return Built(name, key, directory, meta)


def _open_member(archive: Path, member: str) -> Opener:
    @contextlib.contextmanager
    def opener() -> Iterator[IO[bytes]]:
        with tarfile.open(archive) as tar:
            f = tar.extractfile(member)
            if f is None:
                raise ImageError(f"{archive} has no {member}")
            yield f

    return opener


def _debian_packages(root: Path) -> list[str]:
    status = root / "var" / "lib" / "dpkg" / "status"
    packages, name = [], ""
    for line in status.read_text().splitlines():
        if line.startswith("Package: "):
            name = line.split(" ", 1)[1]
        elif line.startswith("Version: ") and name:
            packages.append(f"{name}={line.split(' ', 1)[1]}")
    return sorted(packages)


def _apply_step(image: Image, step: Step, root: Path, log: Path) -> None:
    if isinstance(step, Run):
        with _step(image.name, step.what, step.estimate):
            run_in_chroot(root, step.argv, log, f"{image.name}: {step.what}")
    elif isinstance(step, Copy):
        src = Path(step.src) if step.src.startswith("/") else image.directory / step.src
        dest = root / step.dest.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        os.chown(dest, 0, 0)
        os.chmod(dest, step.mode)
        os.utime(dest, (SOURCE_DATE_EPOCH, SOURCE_DATE_EPOCH))
    elif isinstance(step, Link):
        dest = root / step.dest.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.unlink(missing_ok=True)
        dest.symlink_to(step.target)
    elif isinstance(step, Remove):
        for rel in step.paths:
            (root / rel.lstrip("/")).unlink(missing_ok=True)


def _remove_tree(path: Path) -> None:
    # rm is several times faster than shutil.rmtree on a root filesystem's 10,000 files.
    subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], check=True)


def _build(image: Image, key: str, work: Path, root: Path, parent: Built | None) -> dict[str, Any]:
    """Build ``image`` in ``work`` (image.tar, the log) with its root filesystem at ``root``."""
    log = work / "build.log"
    layers: list[tuple[str, Opener, int]] = []
    layer_meta: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    if parent is not None:
        root.mkdir()
        for layer in parent.meta["layers"]:
            layers.append(
                (layer["diff_id"], _open_member(parent.archive, layer["member"]), layer["size"])
            )
            layer_meta.append(layer)
        if image.steps:  # else only the config changes: nothing to unpack
            with _step(image.name, f"unpack the {parent.name} image", "~10 s"):
                for layer in parent.meta["layers"]:
                    with _open_member(parent.archive, layer["member"])() as stream:
                        _apply_layer(root, stream, layer["whiteouts"])
        history = list(parent.meta["history"])
        config = dict(parent.meta["config"]["config"])
        before = snapshot(root)
    elif image.debian is not None:
        d = image.debian
        argv = [
            "mmdebstrap",
            "--mode=root",
            "--variant=apt",
            "--format=directory",
            f"--include={','.join(d.packages)}",
            *(f"--dpkgopt={o}" for o in d.dpkg_options),
            *d.options,
            '--aptopt=Acquire::Retries "3"',
            d.suite,
            str(root),
            *DEBIAN_SOURCES,
        ]
        what = f"mmdebstrap Debian {d.suite} with {', '.join(d.packages)}"
        with _step(image.name, what, "~3 min on 2 cores, ~60 MB from the Debian mirror"):
            env = {**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)}
            _run_logged(argv, log, f"{image.name}: mmdebstrap", env=env)
        before = {}
    else:
        root.mkdir()
        before = {}

    for step in image.steps:
        _apply_step(image, step, root, log)

    with _step(image.name, "write the layer", "~10 s for 200 MB"):
        after = snapshot(root)
        layer_path = work / "layer.tar"
        if after != before:
            layer = write_layer(root, before, after, layer_path)
            member = _archive_member(layer.diff_id)
            own = {
                "diff_id": layer.diff_id,
                "member": member,
                "size": layer.size,
                "whiteouts": layer.whiteouts,
                "entries": layer.entries,
            }
            layers.append((layer.diff_id, lambda: open(layer_path, "rb"), layer.size))  # noqa: SIM115
            layer_meta.append(own)
            history.append({"created": CREATED, "created_by": f"gpupaas image {image.name}"})
        else:
            history.append(
                {
                    "created": CREATED,
                    "created_by": f"gpupaas image {image.name}",
                    "empty_layer": True,
                }
            )
    if (root / "var/lib/dpkg/status").exists():
        packages = _debian_packages(root)
    else:  # nothing unpacked (only the config changed), or no Debian at all
        packages = list(parent.meta["debian_packages"]) if parent else []
    config = _merge_config(config, image.config)
    image_config = {
        "architecture": _arch(),
        "os": "linux",
        "created": CREATED,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [d for d, _, _ in layers]},
        "history": history,
    }
    with _step(image.name, "write the archive"):
        _write_archive(work / "image.tar", image.references, image_config, layers)
    layer_path.unlink(missing_ok=True)
    return {
        "name": image.name,
        "key": key,
        "references": list(image.references),
        "layers": layer_meta,
        "history": history,
        "config": image_config,
        "debian_packages": packages,
        "size": (work / "image.tar").stat().st_size,
    }


def build_image(
    name: str, *, rebuild: bool = False, _done: dict[str, Built] | None = None
) -> Built:
    """The image ``name`` from the cache, built (with its parents) when its inputs changed;
    ``rebuild``: built again in any case (its parents come from the cache if they can)."""
    done = {} if _done is None else _done
    if name in done:
        return done[name]
    image = IMAGES[name]
    parent = build_image(image.parent, _done=done) if image.parent else None
    key = cache_key(name)
    cache = cache_dir()
    final = cache / key
    found = None if rebuild else _load(final, name, key)
    if found is None:
        with _locked(cache / "locks" / f"{key}.lock", name):
            found = None if rebuild else _load(final, name, key)
            if found is None:
                found = _build_locked(image, key, final, parent)
    done[name] = found
    return found


def _build_locked(image: Image, key: str, final: Path, parent: Built | None) -> Built:
    if os.geteuid() != 0:
        raise ImageError(
            f"building the {image.name} image needs root (mmdebstrap --mode=root, chroot, "
            "unshare -m); run this command as root"
        )
    scratch = scratch_dir()
    for stale in [*final.parent.glob(f"{key}.partial-*"), *scratch.glob(f"{key}.partial-*")]:
        _remove_tree(stale)  # a build that was killed: we hold its lock now
    work = final.parent / f"{key}.partial-{os.getpid()}"
    work.mkdir(parents=True)
    tree = scratch / f"{key}.partial-{os.getpid()}"
    tree.mkdir(parents=True)
    say(f"building {image.name} image (key {key[:12]}) in {work}, its files in {tree}")
    started = time.monotonic()
    try:
        meta = _build(image, key, work, tree / "rootfs", parent)
    except BaseException:
        say(f"building {image.name} image failed; its log is {work / 'build.log'}")
        raise
    finally:
        _remove_tree(tree)
    meta["build_seconds"] = round(time.monotonic() - started, 1)
    meta["built_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (work / "image.json").write_text(json.dumps(meta, indent=1) + "\n")
    if final.exists():  # --rebuild: the old one goes once the new one is complete
        old = final.parent / f"{key}.old-{os.getpid()}"
        final.rename(old)
        _remove_tree(old)
    work.rename(final)
    size_mb = meta["size"] / 1e6
    took = _duration(meta["build_seconds"])
    say(f"built {image.name} image in {took}: {size_mb:.1f} MB, {final / 'image.tar'}")
    built = _load(final, image.name, key)
    assert built is not None
    return built


def _entry(built: Built) -> dict[str, Any]:
    return {
        "name": built.name,
        "archive": str(built.archive.resolve()),
        "references": list(built.meta["references"]),
        "key": built.key,
        "size": built.meta["size"],
    }


def ensure_images(names: Sequence[str] | None = None, *, rebuild: bool = False) -> Path:
    """Build what is missing or changed of ``names`` (default: every image) and the pause
    image, and return the path of the index that lists their archives."""
    unknown = sorted(set(names or ()) - set(IMAGES))
    if unknown:
        raise ImageError(f"no such image: {', '.join(unknown)} (known: {', '.join(IMAGES)})")
    # In the order of IMAGES: a parent that is asked for is built (or rebuilt) before its children.
    wanted = [n for n in IMAGES if n != PAUSE and (not names or n in names)]
    started = time.monotonic()
    done: dict[str, Built] = {}
    pause = build_image(PAUSE, rebuild=rebuild and (not names or PAUSE in names), _done=done)
    images = [build_image(n, rebuild=rebuild, _done=done) for n in wanted]
    pause_entry = _entry(pause)
    index = {
        "images": [_entry(b) for b in images],
        "pause": {**pause_entry, "reference": pause_entry["references"][0]},
    }
    data = (json.dumps(index, indent=1) + "\n").encode()
    directory = cache_dir() / "index"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{hashlib.sha256(data).hexdigest()[:16]}.json"
    tmp = directory / f".{path.name}.{os.getpid()}"
    tmp.write_bytes(data)
    os.replace(tmp, path)
    names_done = ", ".join(b.name for b in [pause, *images])
    say(f"images ready in {_duration(time.monotonic() - started)}: {names_done}")
    return path


def prune() -> list[Path]:
    """Remove the cached images that no current recipe has as its key (older builds), and the
    index files that name them; return what was removed."""
    cache = cache_dir()
    current = {cache_key(name) for name in IMAGES}
    removed = []
    for entry in sorted(cache.iterdir()) if cache.is_dir() else []:
        key = entry.name.split(".", 1)[0]
        if len(key) == 64 and entry.is_dir() and key not in current:
            with _locked(cache / "locks" / f"{key}.lock", key[:12]):
                _remove_tree(entry)
            (cache / "locks" / f"{key}.lock").unlink(missing_ok=True)
            removed.append(entry)
    for index in sorted((cache / "index").glob("*.json")):
        archives = [i["archive"] for i in json.loads(index.read_text())["images"]]
        if not all(Path(a).exists() for a in archives):
            index.unlink()
            removed.append(index)
    return removed


def main(argv: Sequence[str] | None = None) -> int:
    from deploy.devtools import images  # the package, whose docstring describes the tool

    parser = argparse.ArgumentParser(
        prog="python -m deploy.devtools.images", description=(images.__doc__ or "").split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build what changed; print the index file's path")
    build.add_argument(
        "--only", nargs="+", metavar="NAME", choices=sorted(IMAGES), help="these images (and pause)"
    )
    build.add_argument("--rebuild", action="store_true", help="build again even when cached")
    sub.add_parser("keys", help="print each image's cache key")
    sub.add_parser("prune", help="remove cached images of older recipes")
    args = parser.parse_args(argv)
    if args.command == "keys":
        for name in IMAGES:
            print(f"{name} {cache_key(name)}")
        return 0
    if args.command == "prune":
        for path in prune():
            print(f"removed {path}")
        return 0
    try:
        print(ensure_images(args.only, rebuild=args.rebuild))
    except ImageError as e:
        say(f"error: {e}")
        return 1
    return 0
