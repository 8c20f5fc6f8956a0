"""Build and run CoreDNS, the cluster DNS server of the real nodes.

The Go module lives in ``deploy/coredns``: CoreDNS's own main with only the plugins a cluster's
DNS needs (bind, ready, health, errors, log, cache, kubernetes, loop, forward). The built
binary is cached outside git, keyed by a sha256 of go.mod, go.sum and the Go sources:
``${GPUPAAS_COREDNS_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpupaas/coredns}/<hash>/coredns``.

Command line::

    python -m deploy.devtools.coredns build        # prints the binary path
    python -m deploy.devtools.coredns corefile --listen 10.250.0.1:53 --kubeconfig FILE \\
        --health-port 8080 --ready-port 8181       # prints the Corefile

Environment:

* ``GPUPAAS_COREDNS_BINARY``: use this binary, never build.
* ``GPUPAAS_COREDNS_CACHE_DIR``: where built binaries are cached.
* The Go toolchain is found as for kubesim (``KUBESIM_GO``, ``go`` on PATH,
  /usr/local/go/bin/go); ``KUBESIM_BUILD_JOBS`` sets ``go build -p``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import ipaddress
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from deploy.devtools import gobuild
from deploy.devtools.kubesim import _file_lock, _tail, find_go, terminate

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO_ROOT / "deploy" / "coredns"
BINARY_NAME = "coredns"
# Measured: a cold build (empty Go build cache, modules downloaded) took 5 m 17 s on 2 cores
# while another Go build ran (load average 4-10).
COLD_BUILD_MINUTES = 2
DEFAULT_START_TIMEOUT = 60.0

_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


class CorednsError(RuntimeError):
    """CoreDNS could not be built or did not come up."""


class ToolchainMissingError(CorednsError):
    """No Go toolchain to build CoreDNS with."""


# ---------------------------------------------------------------------------------------------
# building


def cache_root() -> Path:
    env = os.environ.get("GPUPAAS_COREDNS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gpupaas" / "coredns"


def _source_files(source_dir: Path) -> list[Path]:
    files = [source_dir / "go.mod", source_dir / "go.sum"]
    files += sorted(p for p in source_dir.rglob("*.go") if p.is_file())
    return files


def source_hash(source_dir: Path = SOURCE_DIR) -> str:
    """sha256 over go.mod, go.sum and every *.go file (names and contents)."""
    digest = hashlib.sha256()
    for path in _source_files(source_dir):
        rel = path.relative_to(source_dir).as_posix()
        data = path.read_bytes()
        digest.update(f"{rel}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def cached_binary_path(source_dir: Path = SOURCE_DIR) -> Path:
    return cache_root() / source_hash(source_dir)[:32] / BINARY_NAME


def coredns_version(source_dir: Path = SOURCE_DIR) -> str:
    """The github.com/coredns/coredns version pinned in go.mod, e.g. ``v1.15.0``."""
    text = (source_dir / "go.mod").read_text()
    match = re.search(r"github\.com/coredns/coredns\s+(v\d+\.\d+\.\d+)\b", text)
    if not match:
        raise CorednsError("github.com/coredns/coredns is not pinned in deploy/coredns/go.mod")
    return match.group(1)


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
        f"the Go toolchain (go >= 1.26) is needed to build deploy/coredns: {where} "
        f"(and no cached binary at {cached_binary_path()})"
    )


def build(output: Path, *, source_dir: Path = SOURCE_DIR, log: Path | None = None) -> None:
    """Run ``go build`` for CoreDNS into ``output`` (no caching, no locking)."""
    go = require_go()
    env = dict(os.environ)
    env.update(
        {"GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly -buildvcs=false"}
    )
    jobs = os.environ.get("KUBESIM_BUILD_JOBS") or str(os.cpu_count() or 2)
    cmd = [
        go, "build", "-v", "-p", jobs, *gobuild.COMMON_FLAGS, "-ldflags", "-s -w",
        "-o", str(output), ".",
    ]  # fmt: skip
    output.parent.mkdir(parents=True, exist_ok=True)
    log_path = log or output.parent / "build.log"
    total = gobuild.package_count(go, ".", cwd=source_dir, env=env)
    returncode = gobuild.run_with_progress(
        cmd, cwd=source_dir, env=env, log_path=log_path, total=total, name="coredns"
    )
    if returncode != 0:
        raise CorednsError(
            f"building CoreDNS failed (exit {returncode}): {' '.join(cmd)}\n{_tail(log_path, 60)}"
        )


def ensure_binary(*, verbose: bool = True) -> Path:
    """Return the CoreDNS binary, building it when the cached one is missing or stale.

    Parallel callers serialise on a file lock (and say whose build they wait for), so it is
    built once.
    """
    override = os.environ.get("GPUPAAS_COREDNS_BINARY")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise CorednsError(f"GPUPAAS_COREDNS_BINARY={override} does not exist")
        return path
    target = cached_binary_path()
    if target.is_file():
        return target
    require_go()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(target.parent / ".lock", verbose=verbose):
        if target.is_file():
            return target
        if verbose:
            print(
                f"coredns: building CoreDNS {coredns_version()} into {target} "
                f"(a cold build takes ~{COLD_BUILD_MINUTES} minutes on 2 cores)",
                file=sys.stderr,
                flush=True,
            )
        started = time.monotonic()
        tmp = target.with_name(f".{BINARY_NAME}.{os.getpid()}.tmp")
        try:
            build(tmp, log=target.parent / "build.log")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        if verbose:
            print(
                f"coredns: built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True
            )
    return target


def _build_lock(path: Path, *, verbose: bool) -> contextlib.AbstractContextManager[None]:
    """The build lock kubesim's and helm's builds use, naming CoreDNS while it waits."""
    return _file_lock(path, what="CoreDNS", tool="coredns", verbose=verbose)


# ---------------------------------------------------------------------------------------------
# configuration


def split_listen(listen: str) -> tuple[str, int]:
    """``"10.250.0.1:53"``, ``"[fd00::a]:53"`` or a bare address (port 53) → (ip, port)."""
    host, port = listen, 53
    match = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?|([^:\[\]]+):(\d+)", listen)
    if match:
        host = match.group(1) or match.group(3)
        port_text = match.group(2) or match.group(4)
        if port_text is not None:
            port = int(port_text)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"listen must be IP[:PORT], an IP address: {listen!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"listen port out of range: {listen!r}")
    return str(address), port


def _token(value: str, what: str) -> str:
    """One Corefile token: quoted when it holds a space, ``#`` or a brace."""
    if not value or any(c in value for c in '"\\\n\r') or "{$" in value:
        raise ValueError(f"{what} cannot be written into a Corefile: {value!r}")
    if any(c.isspace() or c in "#{}" for c in value):
        return f'"{value}"'
    return value


def _loopback(port: int, what: str) -> str:
    if not 0 < port < 65536:
        raise ValueError(f"{what} out of range: {port}")
    return f"127.0.0.1:{port}"


def corefile(
    *,
    listen: str,
    kubeconfig: str,
    cluster_domain: str = "cluster.local",
    upstream: str = "/etc/resolv.conf",
    health_port: int,
    ready_port: int,
    log_queries: bool = False,
) -> str:
    """The Corefile of a node's DNS server.

    ``listen`` is ``IP[:PORT]`` (port 53 by default): the server binds only that address.
    Names under ``cluster_domain`` and the reverse zones are answered from the API server
    ``kubeconfig`` points at (Services, headless endpoints, ``pods insecure`` A records);
    reverse lookups it does not know and every other name go to ``upstream`` (a resolv.conf
    path or space-separated nameserver addresses). Health (``/health``) and readiness
    (``/ready``: the kubernetes plugin has synced) are served on loopback ports.
    """
    host, port = split_listen(listen)
    domain = cluster_domain.strip(".").lower()
    if len(domain) > 253 or not all(_LABEL.match(label) for label in domain.split(".")):
        raise ValueError(f"not a domain name: {cluster_domain!r}")
    upstreams = upstream.split()
    if not upstreams:
        raise ValueError("upstream is empty")
    forward_to = " ".join(_token(u, "upstream") for u in upstreams)
    lines = [
        f".:{port} {{",
        f"    bind {host}",
        "    errors",
        *(["    log"] if log_queries else []),
        f"    health {_loopback(health_port, 'health_port')}",
        f"    ready {_loopback(ready_port, 'ready_port')}",
        f"    kubernetes {domain} in-addr.arpa ip6.arpa {{",
        f"        kubeconfig {_token(kubeconfig, 'kubeconfig')}",
        "        pods insecure",
        "        fallthrough in-addr.arpa ip6.arpa",
        "        ttl 5",
        "    }",
        f"    forward . {forward_to}",
        "    cache 5",
        "    loop",
        "}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# running


@dataclass
class Coredns:
    """A running CoreDNS. Use as a context manager or call :meth:`stop`."""

    process: subprocess.Popen[bytes]
    corefile: Path
    log: Path
    ready_url: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL on timeout. Returns the exit code."""
        return terminate(self.process, timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    def __enter__(self) -> Coredns:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start(
    corefile_text: str,
    work_dir: Path | str,
    *,
    ready_port: int,
    timeout: float = DEFAULT_START_TIMEOUT,
) -> Coredns:
    """Write ``work_dir/Corefile``, start CoreDNS on it (in a new session) and wait until
    ``http://127.0.0.1:<ready_port>/ready`` answers 200 (the kubernetes plugin has synced).

    Raises :class:`CorednsError` with the log's tail when it exits or times out.
    """
    binary = ensure_binary()
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    path = work / "Corefile"
    path.write_text(corefile_text)
    log = work / "coredns.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(binary), "-conf", str(path)],
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Coredns(
        process=process, corefile=path, log=log, ready_url=f"http://127.0.0.1:{ready_port}/ready"
    )
    deadline = time.monotonic() + timeout
    while True:
        code = process.poll()
        if code is not None:
            raise CorednsError(f"coredns exited with {code} before ready\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.ready_url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return server
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise CorednsError(f"coredns not ready after {timeout:.0f}s\n{server.log_tail()}")
        time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.coredns", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build CoreDNS if needed and print the binary path")
    conf = sub.add_parser("corefile", help="print the Corefile of a node's DNS server")
    conf.add_argument("--listen", required=True, help="IP[:PORT] to bind (port 53 by default)")
    conf.add_argument("--kubeconfig", required=True)
    conf.add_argument("--cluster-domain", default="cluster.local")
    conf.add_argument("--upstream", default="/etc/resolv.conf")
    conf.add_argument("--health-port", required=True, type=int)
    conf.add_argument("--ready-port", required=True, type=int)
    conf.add_argument("--log-queries", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "corefile":
        try:
            text = corefile(
                listen=args.listen,
                kubeconfig=args.kubeconfig,
                cluster_domain=args.cluster_domain,
                upstream=args.upstream,
                health_port=args.health_port,
                ready_port=args.ready_port,
                log_queries=args.log_queries,
            )
        except ValueError as exc:
            print(f"coredns: {exc}", file=sys.stderr)
            return 2
        sys.stdout.write(text)
        return 0
    try:
        binary = ensure_binary()
    except CorednsError as exc:
        print(f"coredns: {exc}", file=sys.stderr)
        return 1
    print(binary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
