"""Build and run kubesim: a real Kubernetes control plane on 127.0.0.1 with simulated GPU nodes.

The Go sources live in ``deploy/kubesim``. The built binary is cached outside git, keyed by a
sha256 of go.mod, go.sum, the Go sources and the embedded topology files:
``${KUBESIM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpupaas/kubesim}/<hash>/kubesim``.

Command line::

    python -m deploy.devtools.kubesim build            # prints the binary path
    python -m deploy.devtools.kubesim up --data-dir DIR [--topology FILE]

Environment:

* ``KUBESIM_BINARY``: use this binary, never build.
* ``KUBESIM_GO``: the ``go`` command to build with (default: ``go`` on PATH, then
  /usr/local/go/bin/go).
* ``KUBESIM_CACHE_DIR``: where built binaries are cached.
* ``KUBESIM_BUILD_JOBS``: ``go build -p`` (default: number of CPUs).
* ``KUBESIM_IMAGE_INDEX``: with real nodes, import the images of this index (written by
  ``python -m deploy.devtools.images build``) instead of building them.

Real nodes (``start(..., real_nodes=True)``, ``up --real-nodes``): the nodes of the topology's
pools marked ``real`` run the upstream kubelet linked into the binary, with Debian's
containerd and runc, the CNI bridge, kube-proxy and CoreDNS (deploy/devtools/coredns.py),
importing the images built by deploy/devtools/images.py. :func:`real_nodes_unavailable` says
why a machine cannot run them.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from deploy.devtools import gobuild

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO_ROOT / "deploy" / "kubesim"
TOPOLOGY_DIR = SOURCE_DIR / "topologies"
DEFAULT_TOPOLOGY = TOPOLOGY_DIR / "default.yaml"
TINY_TOPOLOGY = TOPOLOGY_DIR / "tiny.yaml"
REALNODES_TOPOLOGY = TOPOLOGY_DIR / "realnodes.yaml"
# Debian packages a real node needs (containerd, runc, CNI plugins, iptables for kube-proxy).
REAL_NODE_PACKAGES = ("containerd", "runc", "containernetworking-plugins", "iptables", "iproute2")
REAL_NODE_START_TIMEOUT = 600.0
BINARY_NAME = "kubesim"
DEFAULT_START_TIMEOUT = 300.0


def terminate(process: subprocess.Popen[Any], *, timeout: float, kill_wait: float = 10) -> int:
    """SIGTERM a child process, SIGKILL it if it has not exited within ``timeout`` seconds;
    its exit code (at once if it has already exited)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=kill_wait)
    return int(process.returncode)


class KubesimError(RuntimeError):
    """kubesim could not be built or did not come up."""


class ToolchainMissingError(KubesimError):
    """No Go toolchain to build kubesim with."""


# ---------------------------------------------------------------------------------------------
# building


def cache_root() -> Path:
    env = os.environ.get("KUBESIM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gpupaas" / "kubesim"


def _source_files(source_dir: Path) -> list[Path]:
    files = [source_dir / "go.mod", source_dir / "go.sum"]
    for path in sorted(source_dir.rglob("*")):
        rel = path.relative_to(source_dir)
        if not path.is_file() or rel.parts[0] in {"bin", ".git"}:
            continue
        embedded = rel.parts[0] == "topologies" and path.suffix in {".yaml", ".yml"}
        if path.suffix == ".go" or embedded:
            files.append(path)
    return files


def source_hash(source_dir: Path = SOURCE_DIR) -> str:
    """sha256 over go.mod, go.sum, every *.go file and the embedded topology files."""
    digest = hashlib.sha256()
    for path in _source_files(source_dir):
        rel = path.relative_to(source_dir).as_posix()
        data = path.read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def cached_binary_path(source_dir: Path = SOURCE_DIR) -> Path:
    return cache_root() / source_hash(source_dir)[:32] / BINARY_NAME


def find_go() -> str | None:
    """``$KUBESIM_GO`` if set (and then only it), else ``go`` on PATH or /usr/local/go/bin/go."""
    explicit = os.environ.get("KUBESIM_GO")
    candidates: list[str | None] = (
        [explicit] if explicit else [shutil.which("go"), "/usr/local/go/bin/go"]
    )
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def require_go() -> str:
    go = find_go()
    if go is not None:
        return go
    explicit = os.environ.get("KUBESIM_GO")
    where = (
        f"$KUBESIM_GO={explicit} is not an executable"
        if explicit
        else "no `go` on PATH and no /usr/local/go/bin/go"
    )
    raise ToolchainMissingError(
        f"the Go toolchain (go >= 1.26) is needed to build deploy/kubesim: {where} "
        f"(and no cached binary at {cached_binary_path()})"
    )


def kubernetes_version(source_dir: Path = SOURCE_DIR) -> str:
    """The k8s.io/kubernetes version pinned in go.mod, e.g. ``v1.36.3``."""
    text = (source_dir / "go.mod").read_text()
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\d+\.\d+\.\d+)\s*$", text, re.MULTILINE)
    if not match:
        raise KubesimError("k8s.io/kubernetes is not pinned in deploy/kubesim/go.mod")
    return match.group(1)


def build_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def build(
    output: Path,
    *,
    source_dir: Path = SOURCE_DIR,
    log: Path | None = None,
    on_progress: gobuild.Progress | None = None,
) -> None:
    """Run ``go build`` for kubesim into ``output`` (no caching, no locking)."""
    go = require_go()
    env = dict(os.environ)
    env.update({"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"})
    jobs = os.environ.get("KUBESIM_BUILD_JOBS") or str(os.cpu_count() or 2)
    cmd = [
        go, "build", "-v", "-p", jobs, *gobuild.COMMON_FLAGS, "-buildvcs=false",
        "-ldflags", build_ldflags(kubernetes_version(source_dir)),
        "-o", str(output), ".",
    ]  # fmt: skip
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = log or output.parent / "build.log"
    if on_progress is not None:
        on_progress("kubesim: counting the packages to build (and downloading their modules)")
    total = gobuild.package_count(go, ".", cwd=source_dir, env=env)
    returncode = gobuild.run_with_progress(
        cmd,
        cwd=source_dir,
        env=env,
        log_path=log_path,
        total=total,
        name="kubesim",
        on_progress=on_progress,
    )
    if returncode != 0:
        raise KubesimError(
            f"building kubesim failed (exit {returncode}): {' '.join(cmd)}\n{_tail(log_path, 60)}"
        )


# Measured on 2 cores with empty Go caches (modules downloaded too): see docs/first-start.md.
COLD_BUILD_MINUTES = 8


def ensure_binary(*, verbose: bool = True, on_progress: gobuild.Progress | None = None) -> Path:
    """Return the kubesim binary, building it when the cached one is missing or stale.

    Parallel callers (pytest-xdist workers) serialise on a file lock, so it is built once.
    ``on_progress`` hears the build's progress lines.
    """
    override = os.environ.get("KUBESIM_BINARY")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise KubesimError(f"KUBESIM_BINARY={override} does not exist")
        return path
    target = cached_binary_path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    require_go()
    with _file_lock(target.parent / ".lock", what=f"kubesim {target.parent.name}"):
        if target.is_file():
            return target
        if verbose:
            print(
                f"kubesim: building {target} (a cold build takes ~{COLD_BUILD_MINUTES} minutes "
                f"on 2 cores; progress every {gobuild.PROGRESS_EVERY:.0f} s, log "
                f"{target.parent / 'build.log'})",
                file=sys.stderr,
                flush=True,
            )
        started = time.monotonic()
        tmp = target.with_name(f".{BINARY_NAME}.{os.getpid()}.tmp")
        try:
            build(tmp, log=target.parent / "build.log", on_progress=on_progress)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        if verbose:
            print(
                f"kubesim: built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True
            )
    return target


@contextlib.contextmanager
def _file_lock(
    path: Path, *, what: str = "kubesim", tool: str = "kubesim", verbose: bool = True
) -> Iterator[None]:
    """An exclusive lock on ``path`` (the builds of kubesim, CoreDNS and helm); while another
    process holds it, say so (with its pid, written into the file by the holder) instead of
    waiting silently."""
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if verbose:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                print(
                    f"{tool}: waiting for another build of {what} (lock held by pid {holder})",
                    file=sys.stderr,
                    flush=True,
                )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class Kubesim:
    """A running ``kubesim up``. Use as a context manager or call :meth:`stop`."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    kubeconfig: Path
    server: str
    ports: dict[str, int]
    nodes: list[str] = field(default_factory=list)
    ready_seconds: float = 0.0
    # With real nodes: READY's "real" (nodes with name, ip, pod_subnet, dir,
    # kubelet_pid_file; host_ip, dns, pod_cidr, host_link, netns_pid).
    real: dict[str, Any] | None = None

    @property
    def real_nodes(self) -> list[str]:
        return [n["name"] for n in (self.real or {}).get("nodes", [])]

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM ``kubesim up`` (it stops its components in reverse order); SIGKILL on timeout.

        The components die with it either way (parent-death signal). Returns the exit code.
        """
        return terminate(self.process, timeout=timeout, kill_wait=30)

    def logs_tail(self, lines: int = 40) -> str:
        return _logs_tail(self.data_dir, lines)

    def __enter__(self) -> Kubesim:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start(
    data_dir: Path | str,
    topology: Path | str | None = None,
    timeout: float = DEFAULT_START_TIMEOUT,
    *,
    extra_args: Sequence[str] = (),
    watch_parent: bool = True,
    real_nodes: bool = False,
) -> Kubesim:
    """Start ``kubesim up`` in a new session and wait until DATA_DIR/READY appears.

    ``topology`` defaults to the embedded topologies/default.yaml (with ``real_nodes``:
    topologies/realnodes.yaml). With ``watch_parent`` the cluster also stops when this Python
    process dies without calling :meth:`Kubesim.stop`. ``real_nodes`` runs the pools marked
    real as real nodes (images and CoreDNS are built first when missing; see
    :func:`real_nodes_unavailable`). Raises :class:`KubesimError` with the tail of the logs
    when it fails or times out.
    """
    binary = ensure_binary()
    if real_nodes:
        problem = real_nodes_unavailable()
        if problem:
            raise KubesimError(f"real nodes cannot run here: {problem}")
        extra_args = [*real_node_args(), *extra_args]
        if topology is None:
            topology = REALNODES_TOPOLOGY
        timeout = max(timeout, REAL_NODE_START_TIMEOUT)
        extra_args = [*extra_args, f"--ready-timeout={int(timeout)}s"]
    data = Path(data_dir).resolve()
    (data / "logs").mkdir(parents=True, exist_ok=True)
    ready = data / "READY"
    ready.unlink(missing_ok=True)
    cmd = [str(binary), "up", "--data-dir", str(data)]
    if topology is not None:
        cmd += ["--topology", str(Path(topology).resolve())]
    if watch_parent:
        cmd += ["--watch-pid", str(os.getpid())]
    cmd += list(extra_args)
    console = data / "logs" / "up.console.log"
    with console.open("ab") as out:
        process = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while True:
        if ready.is_file():
            try:
                info = json.loads(ready.read_text())
            except ValueError:
                info = None
            if info is not None:
                cluster = Kubesim(
                    process=process,
                    data_dir=data,
                    kubeconfig=Path(info["kubeconfig"]),
                    server=info["server"],
                    ports={k: int(v) for k, v in info["ports"].items()},
                    nodes=list(info.get("nodes", [])),
                    ready_seconds=float(info.get("ready_seconds", 0.0)),
                    real=info.get("real"),
                )
                _publish_dra(cluster)
                _install_gateway_crds(cluster)
                return cluster
        code = process.poll()
        if code is not None:
            raise KubesimError(
                f"kubesim up exited with {code} before READY ({' '.join(cmd)})\n{_logs_tail(data)}"
            )
        if time.monotonic() > deadline:
            terminate(process, timeout=30)
            raise KubesimError(f"kubesim not READY after {timeout:.0f}s\n{_logs_tail(data)}")
        time.sleep(0.2)


def _publish_dra(cluster: Kubesim) -> None:
    """The DRA driver's part on the fake GPU nodes: its DeviceClasses and ResourceSlices
    (:mod:`deploy.devtools.dra`), so that a class allocated through DRA finds its devices."""
    from kubernetes import config

    from deploy.devtools import dra

    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        dra.publish(api_client)
    except Exception as exc:
        cluster.stop()
        raise KubesimError(f"publishing the DRA ResourceSlices failed: {exc}") from exc
    finally:
        api_client.close()


def _install_gateway_crds(cluster: Kubesim) -> None:
    """The Gateway API's CRDs and Traefik's (:mod:`deploy.devtools.traefik`), so the cluster
    serves the routes the portal writes as a cluster with a Gateway API implementation does."""
    from kubernetes import config

    from deploy.devtools import traefik

    api_client = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        traefik.install_crds(api_client)
    except Exception as exc:
        cluster.stop()
        raise KubesimError(f"installing the Gateway API CRDs failed: {exc}") from exc
    finally:
        api_client.close()


def real_nodes_unavailable() -> str | None:
    """Why this machine cannot run real nodes, or None: they need root (namespaces, mounts,
    cgroups), the Debian packages of REAL_NODE_PACKAGES and the CNI plugins."""
    if os.geteuid() != 0:
        return "real nodes need root (network and mount namespaces, cgroups)"
    missing = [
        tool
        for tool in ("containerd", "containerd-shim-runc-v2", "ctr", "nsenter", "ip", "iptables")
        if shutil.which(tool) is None
    ]
    if not Path("/usr/sbin/runc").is_file() and shutil.which("runc") is None:
        missing.append("runc")
    if not Path("/usr/lib/cni/bridge").is_file():
        missing.append("/usr/lib/cni/bridge")
    if missing:
        return f"missing {', '.join(missing)} (apt-get install {' '.join(REAL_NODE_PACKAGES)})"
    if not Path("/sys/fs/cgroup").is_dir():
        return "no /sys/fs/cgroup"
    return None


def _images_beside() -> concurrent.futures.Future[Path] | None:
    """The real nodes' images built in a thread beside the cluster's build (None where they
    are given or cannot be built here)."""
    if os.environ.get("KUBESIM_IMAGE_INDEX") or real_nodes_unavailable() is not None:
        return None
    from deploy.devtools import images

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="images")
    future = pool.submit(images.ensure_images)
    pool.shutdown(wait=False)
    return future


def real_node_args(on_step: gobuild.Progress | None = None, index: Path | None = None) -> list[str]:
    """The ``kubesim up`` flags for real nodes, building what they need first: the images
    (deploy/devtools/images.py; ``index`` when already built) and CoreDNS
    (deploy/devtools/coredns.py), each cached. ``on_step`` hears which it is at."""
    from deploy.devtools import coredns, images

    say = on_step or (lambda _step: None)
    override = os.environ.get("KUBESIM_IMAGE_INDEX")
    if index is None:
        say("building (or reusing) the images of the real nodes")
        index = Path(override) if override else images.ensure_images()
    say("building (or reusing) CoreDNS")
    dns = coredns.ensure_binary()
    return ["--real-nodes", f"--images={index}", f"--coredns={dns}"]


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def _logs_tail(data_dir: Path, lines: int = 40) -> str:
    logs = data_dir / "logs"
    parts = []
    for name in ("up.console.log", "up.log"):
        if (logs / name).is_file():
            parts.append(f"--- {logs / name} (last {lines} lines)\n{_tail(logs / name, lines)}")
    others = sorted(p for p in logs.glob("*.log") if not p.name.startswith("up."))
    if others:
        parts.append("component logs: " + ", ".join(str(p) for p in others))
    return "\n".join(parts) or f"(no logs in {logs})"


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.kubesim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build kubesim if needed and print the binary path")
    up = sub.add_parser("up", help="run the cluster in the foreground until Ctrl-C/SIGTERM")
    up.add_argument("--data-dir", required=True, type=Path)
    up.add_argument("--topology", type=Path, default=None)
    up.add_argument(
        "--real-nodes",
        action="store_true",
        help="run the pools marked real as real nodes (default topology: realnodes.yaml)",
    )
    up.add_argument("extra", nargs=argparse.REMAINDER, help="more `kubesim up` flags after --")
    args = parser.parse_args(argv)
    if args.command == "build":
        try:
            print(ensure_binary())
        except KubesimError as exc:
            print(f"kubesim: {exc}", file=sys.stderr)
            return 1
        return 0
    # Until the cluster is READY, a STARTING file beside its kubeconfig says what it is doing
    # (apps.orchestration.starting): the portal answers "the cluster is starting" at once.
    starting = StartingMarker(args.data_dir)
    # The images of the real nodes wait mostly on the Debian mirror and PyPI: built beside the
    # cluster's build, which waits on the CPUs.
    images_build = _images_beside() if args.real_nodes else None
    try:
        starting.say("building the cluster (kubesim)")
        binary = ensure_binary(on_progress=starting.say)
        cmd = [str(binary), "up", "--data-dir", str(args.data_dir)]
        topology = args.topology
        if args.real_nodes:
            problem = real_nodes_unavailable()
            if problem:
                print(f"kubesim: real nodes cannot run here: {problem}", file=sys.stderr)
                starting.clear()
                return 1
            index = images_build.result() if images_build is not None else None
            cmd += [*real_node_args(on_step=starting.say, index=index)]
            cmd += [f"--ready-timeout={int(REAL_NODE_START_TIMEOUT)}s"]
            if topology is None:
                topology = REALNODES_TOPOLOGY
        if topology is not None:
            cmd += ["--topology", str(topology)]
        cmd += [a for a in args.extra if a != "--"]
        starting.say("starting the control plane and the nodes")
    except Exception as exc:
        starting.clear()
        if isinstance(exc, KubesimError):
            print(f"kubesim: {exc}", file=sys.stderr)
            return 1
        raise
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process (same pid, so the STARTING file stays true): Ctrl-C and SIGTERM
    # reach `kubesim up`, which stops cleanly and writes READY once the cluster is up.
    os.execv(str(binary), cmd)  # noqa: S606
    return 0  # pragma: no cover


STEP_WORDS = {
    "kubesim: building": "building the cluster",
    "coredns: building": "building CoreDNS",
    "traefik: building": "building Traefik",
}


class StartingMarker:
    """DATA_DIR/STARTING while ``up`` brings the cluster up: this process's pid (kept through
    the exec into ``kubesim up``) and the step it is at. A READY from an earlier run is removed
    first, so the portal never takes that run's kubeconfig for this one's."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = Path(data_dir)
        self.path = self.dir / "STARTING"
        self.since = time.time()
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "READY").unlink(missing_ok=True)

    def say(self, step: str) -> None:
        for prefix, words in STEP_WORDS.items():
            if step.startswith(prefix):
                step = words + step[len(prefix) :]
                break
        step = step.removeprefix("kubesim: ").removeprefix("coredns: ")
        tmp = self.path.with_name(f".STARTING.{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "since": self.since, "step": step}))
        tmp.replace(self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
