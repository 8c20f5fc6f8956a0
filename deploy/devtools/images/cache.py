"""Where builds are kept and under which key: the cache key of a recipe, the scratch and cache
directories, and the lock that lets one build of an image run at a time."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deploy.devtools.images.progress import _duration, say
from deploy.devtools.images.recipes import (
    IMAGES,
    IMAGES_DIR,
    RECIPE_VERSION,
    SOURCE_DATE_EPOCH,
    Copy,
    Debian,
    Image,
    Link,
    Remove,
    Run,
)


def _recipe(image: Image) -> Any:
    def plain(value: Any) -> Any:
        if isinstance(value, Debian | Run | Copy | Link | Remove):
            return {"type": type(value).__name__, **{k: plain(v) for k, v in vars(value).items()}}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return {
        "name": image.name,
        "references": list(image.references),
        "debian": plain(image.debian),
        "steps": plain(image.steps),
        "config": plain(image.config),
        "pinned": image.pinned,
    }


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_key(
    name: str,
    images_dir: Path | None = None,
    images: dict[str, Image] | None = None,
) -> str:
    """The sha256 (hex) over everything an image is built from: the recipe, each file under
    ``images_dir/<name>/`` (path, executable bit, content), the host files it copies, and its
    parent's key."""
    images = IMAGES if images is None else images
    images_dir = IMAGES_DIR if images_dir is None else images_dir
    image = images[name]
    h = hashlib.sha256()

    def add(label: str, value: str) -> None:
        h.update(f"{label}\0{value}\0".encode())

    add("recipe-version", str(RECIPE_VERSION))
    add("epoch", str(SOURCE_DATE_EPOCH))
    add("recipe", json.dumps(_recipe(image), sort_keys=True))
    directory = images_dir / name
    if directory.is_dir():
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(directory).as_posix()
            add("file", f"{rel}:{os.access(path, os.X_OK)}:{_file_digest(path)}")
    for step in image.steps:
        if isinstance(step, Copy) and step.src.startswith("/"):
            add("host-file", f"{step.src}:{_file_digest(Path(step.src))}")
    if image.parent:
        add("parent", cache_key(image.parent, images_dir, images))
    return h.hexdigest()


SHM = "/dev/shm"  # noqa: S108 - used through _own_directory: ours, or not used


def scratch_dir() -> Path:
    """Where root filesystems are put together: ``$GPUPAAS_IMAGE_SCRATCH_DIR``, else /dev/shm
    when it is a tmpfs with 2 GB free, else the cache. In memory, unpacking a parent, pip's
    20,000 files and removing the tree take seconds; on this machine's shared disk (ext4 with
    synchronous discard) removing the notebook's tree alone took minutes."""
    configured = os.environ.get("GPUPAAS_IMAGE_SCRATCH_DIR")
    if configured:
        return Path(configured)
    shm = Path(SHM)
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
        is_tmpfs = any(line.split()[1:3] == [SHM, "tmpfs"] for line in mounts)
        free = os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize
    except OSError:
        is_tmpfs, free = False, 0
    if is_tmpfs and free >= 2 << 30 and _own_directory(shm / "gpupaas-images"):
        return shm / "gpupaas-images"
    return cache_dir() / "scratch"


def _own_directory(path: Path) -> bool:
    """``path`` is (now) a directory of this user's that only it may write: in a directory
    that anyone may write to, another user could have put a link there first."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = path.lstat()
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def cache_dir() -> Path:
    configured = os.environ.get("GPUPAAS_IMAGE_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "gpupaas" / "images"


# --- locking ----------------------------------------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path, image: str) -> Iterator[None]:
    """Hold an exclusive fcntl lock on ``path``; say who holds it while waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            say(
                f"building {image} image: waiting for another build of the same image "
                f"(lock held by pid {holder})"
            )
            started = time.monotonic()
            fcntl.flock(fd, fcntl.LOCK_EX)
            waited = _duration(time.monotonic() - started)
            say(f"building {image} image: the other build ended after {waited}")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the lock
