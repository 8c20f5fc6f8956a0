"""Root filesystems and layers: snapshots of a tree, the layer of what changed, applying a
layer, and running a recipe's commands in a chroot."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shlex
import shutil
import stat
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from deploy.devtools.images.cache import SHM
from deploy.devtools.images.progress import _run_logged
from deploy.devtools.images.recipes import NOT_IN_LAYERS, PATH, SOURCE_DATE_EPOCH, ImageError

Snapshot = dict[str, tuple[int, ...]]


def _excluded(rel: str) -> bool:
    return any(rel.startswith(d + "/") for d in NOT_IN_LAYERS)


def snapshot(root: Path) -> Snapshot:
    """Every path under ``root`` (relative, POSIX) with what tells a change: for files and links
    the inode, ctime, mtime, size, mode and owners (ctime moves on any write, which a tool cannot
    set back); for directories mode, owners and mtime (their entries speak for themselves)."""
    found: Snapshot = {}

    def walk(directory: str) -> None:
        with os.scandir(root / directory if directory else root) as entries:
            for entry in entries:
                rel = f"{directory}/{entry.name}" if directory else entry.name
                if _excluded(rel):
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    found[rel] = (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns)
                    walk(rel)
                else:
                    found[rel] = (
                        st.st_mode,
                        st.st_uid,
                        st.st_gid,
                        st.st_mtime_ns,
                        st.st_ctime_ns,
                        st.st_ino,
                        st.st_size,
                    )

    walk("")
    return found


class _HashingWriter(io.RawIOBase):
    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.sha = hashlib.sha256()
        self.size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.out.write(view)
        self.sha.update(view)
        self.size += len(view)
        return len(view)


def _tarinfo(root: Path, rel: str, hardlinks: dict[tuple[int, int], str]) -> tarfile.TarInfo:
    path = root / rel
    st = path.lstat()
    info = tarfile.TarInfo(rel)
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.uname = info.gname = ""
    info.mtime = min(int(st.st_mtime), SOURCE_DATE_EPOCH)
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    elif stat.S_ISREG(st.st_mode):
        first = hardlinks.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
        if first is not None:
            info.type = tarfile.LNKTYPE
            info.linkname = first
        else:
            info.type = tarfile.REGTYPE
            info.size = st.st_size
            if st.st_nlink > 1:
                hardlinks[(st.st_dev, st.st_ino)] = rel
    elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        info.type = tarfile.CHRTYPE if stat.S_ISCHR(st.st_mode) else tarfile.BLKTYPE
        info.devmajor, info.devminor = os.major(st.st_rdev), os.minor(st.st_rdev)
    elif stat.S_ISFIFO(st.st_mode):
        info.type = tarfile.FIFOTYPE
    else:
        raise ImageError(f"cannot put {path} (a socket?) in a layer")
    xattrs = {}
    with contextlib.suppress(OSError):
        for attr in sorted(os.listxattr(path, follow_symlinks=False)):
            if attr != "security.selinux":
                value = os.getxattr(path, attr, follow_symlinks=False)
                xattrs[f"SCHILY.xattr.{attr}"] = value.decode("utf-8", "surrogateescape")
    if xattrs:
        info.pax_headers = xattrs
    return info


@dataclass
class Layer:
    diff_id: str  # "sha256:…" of the uncompressed tar
    size: int
    whiteouts: list[str]
    entries: int


def write_layer(root: Path, before: Snapshot, after: Snapshot, out: Path) -> Layer:
    """The changes from ``before`` to ``after`` (both of ``root``) as a layer tar: changed and
    new paths in sorted order (a directory before its contents), deleted ones as whiteouts."""
    changed = sorted(
        (p for p, v in after.items() if before.get(p) != v), key=lambda p: p.split("/")
    )
    gone = [p for p in before if p not in after]
    gone_set = set(gone)
    whiteouts = sorted(
        p
        for p in gone
        if not any(a in gone_set for a in _ancestors(p))
        and not any(a in after and not stat.S_ISDIR(after[a][0]) for a in _ancestors(p))
    )
    entries: list[tuple[list[str], str | None, str]] = [(p.split("/"), p, "") for p in changed]
    for p in whiteouts:
        parent, _, base = p.rpartition("/")
        name = f"{parent}/.wh.{base}" if parent else f".wh.{base}"
        entries.append((name.split("/"), None, name))
    entries.sort(key=lambda e: e[0])
    hardlinks: dict[tuple[int, int], str] = {}
    with open(out, "wb") as f:
        writer = _HashingWriter(f)
        with tarfile.open(fileobj=writer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for _, rel, whiteout in entries:
                if rel is None:
                    info = tarfile.TarInfo(whiteout)
                    info.mtime = SOURCE_DATE_EPOCH
                    info.mode = 0o644
                    tar.addfile(info)
                    continue
                info = _tarinfo(root, rel, hardlinks)
                if info.type == tarfile.REGTYPE:
                    with open(root / rel, "rb") as data:
                        tar.addfile(info, data)
                else:
                    tar.addfile(info)
    return Layer(f"sha256:{writer.sha.hexdigest()}", writer.size, whiteouts, len(entries))


def _ancestors(rel: str) -> Iterator[str]:
    parts = rel.split("/")
    for i in range(1, len(parts)):
        yield "/".join(parts[:i])


def _apply_layer(root: Path, stream: IO[bytes], whiteouts: Sequence[str]) -> None:
    """Unpack one layer over ``root``: its whiteouts first, then its files (GNU tar)."""
    for rel in whiteouts:
        target = root / rel
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
    proc = subprocess.Popen(
        [
            "tar",
            "-x",
            "-p",
            "--numeric-owner",
            "--xattrs",
            "--xattrs-include=*",
            "--exclude=.wh.*",
            "-C",
            str(root),
            "-f",
            "-",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    shutil.copyfileobj(stream, proc.stdin, 1 << 20)
    proc.stdin.close()
    err = proc.stderr.read() if proc.stderr else b""
    if proc.wait() != 0:
        raise ImageError(f"unpacking a layer into {root} failed: {err.decode(errors='replace')}")


# What a step's command may need from the host while it runs, never kept in the image: DNS,
# and the host's CA bundle (it may hold the CA of a TLS-intercepting egress proxy).
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
PASSED_ENV = (
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
)


@contextlib.contextmanager
def _placeholder(root: Path, rel: str) -> Iterator[None]:
    """A plain file at ``rel`` for a bind mount to cover while a step runs; afterwards the tree
    is as it was (the directory's mtime included)."""
    target = root / rel
    if target.is_file() and not target.is_symlink():
        yield
        return
    saved = target.parent.stat()
    moved = None
    if target.is_symlink():
        moved = target.with_name(target.name + ".gpupaas-moved")
        target.rename(moved)
    target.write_text("")
    try:
        yield
    finally:
        target.unlink()
        if moved is not None:
            moved.rename(target)
        os.utime(target.parent, ns=(saved.st_atime_ns, saved.st_mtime_ns))


def run_in_chroot(root: Path, argv: Sequence[str], log: Path, label: str) -> None:
    """Run ``argv`` as root chrooted in ``root``, in a private mount namespace that has a /dev,
    /proc, the host's resolv.conf and CA bundle mounted in (they go when it ends)."""
    ca_bundle = os.environ.get("PIP_CERT") or HOST_CA_BUNDLE
    binds = [
        (src, dest)
        for src, dest in (("/etc/resolv.conf", "etc/resolv.conf"), (ca_bundle, HOST_CA_BUNDLE[1:]))
        if Path(src).is_file()
    ]
    env = [f"PATH={PATH}", "HOME=/root", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"]
    env += [f"{k}={os.environ[k]}" for k in PASSED_ENV if os.environ.get(k)]
    if any(dest == HOST_CA_BUNDLE[1:] for _, dest in binds):
        env += [f"PIP_CERT={HOST_CA_BUNDLE}", f"SSL_CERT_FILE={HOST_CA_BUNDLE}"]
    q = shlex.quote
    r = q(str(root))
    # A /dev of its own (the nodes a build needs, a private /dev/shm), and /proc.
    script = [
        f"mount -t tmpfs -o mode=755,size=16m tmpfs {r}/dev",
        *(f"touch {r}/dev/{d} && mount --bind /dev/{d} {r}/dev/{d}" for d in DEV_NODES),
        f"mkdir {r}{SHM} && mount -t tmpfs -o mode=1777,size=256m tmpfs {r}{SHM}",
        f"ln -s /proc/self/fd {r}/dev/fd",
        f"mount -t proc proc {r}/proc",
    ]
    script += [f"mount --bind {q(src)} {r}/{q(dest)}" for src, dest in binds]
    script.append('exec chroot "$@"')
    with contextlib.ExitStack() as stack:
        for _, dest in binds:
            stack.enter_context(_placeholder(root, dest))
        _run_logged(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "/bin/sh",
                "-euc",
                "\n".join(script),
                "sh",
                str(root),
                "/usr/bin/env",
                "-i",
                *env,
                *argv,
            ],
            log,
            label,
        )
