"""Traefik, the Gateway API implementation of the development cluster: built, its CRDs and the
Gateway API's installed, and run against kubesim.

Traefik Proxy (``github.com/traefik/traefik/v3``, pinned in :data:`TRAEFIK_VERSION`) is built
from the Go module proxy: its module is downloaded, copied out of the module cache (its go.mod
has ``replace`` directives, so ``go install …@version`` refuses it) and built as the main
module. The binary is cached outside git, keyed by a sha256 of the version and the build
command: ``${GPUPAAS_TRAEFIK_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpupaas/traefik}/<hash>/``.

The CRDs are read from the Go modules too: the Gateway API's (``sigs.k8s.io/gateway-api``,
:data:`GATEWAY_API_VERSION`, the experimental channel: every standard kind plus the
ExternalAuth filter) and Traefik's own (its Middleware carries the forwardAuth the portal's
routes use). kubesim installs both when it starts (:func:`install_crds`).

Traefik runs on the host, outside the cluster, as kubesim's other components do: it watches
the API server through the admin kubeconfig (``KUBECONFIG``), routes by the HTTPRoutes
attached to the Gateway it serves and proxies to the ready endpoints of their Services (the
pods' IPs, which the host reaches on real nodes). Each Gateway listener's port is the port of
one of Traefik's entry points, on the loopback address::

    python -m deploy.devtools.traefik build            # prints the binary path
    python -m deploy.devtools.traefik up --kubeconfig var/kubesim/admin.kubeconfig \\
        --port 8890 [--tls-port 8891] --data-dir var/traefik

``up`` creates the GatewayClass ``traefik``, the namespace and Gateway the portal's routes
attach to (``gpupaas-gateway/gpupaas``, the portal's GATEWAY_NAMESPACE and GATEWAY_NAME) and,
with ``--tls-port``, an HTTPS listener whose certificate is a self-signed one in a Secret the
listener references.

Environment: ``GPUPAAS_TRAEFIK_BINARY`` (use this binary, never build),
``GPUPAAS_TRAEFIK_CACHE_DIR``; the Go toolchain is found as for kubesim (``KUBESIM_GO``);
``KUBESIM_BUILD_JOBS`` sets ``go build -p``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from deploy.devtools import gobuild
from deploy.devtools.kubesim import _file_lock, _tail, find_go, terminate

TRAEFIK_MODULE = "github.com/traefik/traefik/v3"
TRAEFIK_VERSION = "v3.6.12"
GATEWAY_API_MODULE = "sigs.k8s.io/gateway-api"
GATEWAY_API_VERSION = "v1.6.3"
GATEWAY_API_CHANNEL = "experimental"
# Traefik's CRDs (IngressRoute, Middleware, …) as its documentation publishes them.
TRAEFIK_CRD_FILE = "docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml"
BINARY_NAME = "traefik"
BUILD_FLAGS = (*gobuild.COMMON_FLAGS, "-ldflags", "-s -w")
# Measured on 2 cores with empty Go caches: see docs/first-start.md.
COLD_BUILD_MINUTES = 12
DEFAULT_START_TIMEOUT = 60.0

GATEWAY_CLASS = "traefik"
CONTROLLER_NAME = "traefik.io/gateway-controller"
GATEWAY_NAMESPACE = "gpupaas-gateway"
GATEWAY_NAME = "gpupaas"
TLS_SECRET = "gpupaas-gateway-tls"  # noqa: S105 - a Secret's name
# Which namespaces' routes the development Gateway accepts: the team namespaces the portal made.
ROUTE_NAMESPACE_SELECTOR = {"matchLabels": {"app.kubernetes.io/managed-by": "gpupaas"}}


class TraefikError(RuntimeError):
    """Traefik could not be built, configured or started."""


# ---------------------------------------------------------------------------------------------
# modules and building


def _go() -> str:
    go = find_go()
    if go is None:
        raise TraefikError(
            "the Go toolchain (go >= 1.26) is needed for Traefik and the Gateway API CRDs: no "
            "`go` on PATH, no /usr/local/go/bin/go and no $KUBESIM_GO"
        )
    return go


def module_dir(module: str, version: str) -> Path:
    """The module's directory in the Go module cache, downloaded first when missing."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    result = subprocess.run(
        [_go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        env=env,
        cwd=Path.home(),
        check=False,
    )
    try:
        info = json.loads(result.stdout or b"{}")
    except ValueError:
        info = {}
    if result.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or result.stderr.decode(errors="replace").strip()
        raise TraefikError(f"downloading {module}@{version} failed: {detail}")
    return Path(info["Dir"])


def cache_root() -> Path:
    env = os.environ.get("GPUPAAS_TRAEFIK_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gpupaas" / "traefik"


def build_key() -> str:
    """What the cached binary is keyed by: the module, its version and the build command."""
    text = "\0".join((TRAEFIK_MODULE, TRAEFIK_VERSION, *BUILD_FLAGS, "./cmd/traefik"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cached_binary_path() -> Path:
    return cache_root() / build_key() / BINARY_NAME


def build(output: Path, *, log: Path) -> None:
    """Download Traefik's module, copy it out of the read-only module cache and build it."""
    source = module_dir(TRAEFIK_MODULE, TRAEFIK_VERSION)
    work = output.parent / f".src.{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    for path in [work, *work.rglob("*")]:
        with contextlib.suppress(OSError):
            path.chmod(path.stat().st_mode | 0o200)
    env = {
        **os.environ,
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
        "GOFLAGS": "-mod=mod -buildvcs=false",
    }
    jobs = os.environ.get("KUBESIM_BUILD_JOBS") or str(os.cpu_count() or 2)
    go = _go()
    cmd = [go, "build", "-v", "-p", jobs, *BUILD_FLAGS, "-o", str(output), "./cmd/traefik"]
    try:
        print(
            "traefik: counting the packages to build (and downloading their modules)",
            file=sys.stderr,
            flush=True,
        )
        total = gobuild.package_count(go, "./cmd/traefik", cwd=work, env=env)
        returncode = gobuild.run_with_progress(
            cmd, cwd=work, env=env, log_path=log, total=total, name="traefik"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if returncode != 0:
        raise TraefikError(
            f"building Traefik {TRAEFIK_VERSION} failed (exit {returncode}): "
            f"{' '.join(cmd)}\n{_tail(log, 60)}"
        )


def ensure_binary(*, verbose: bool = True) -> Path:
    """The Traefik binary, built once when the cached one is missing (callers in parallel wait
    on a file lock)."""
    override = os.environ.get("GPUPAAS_TRAEFIK_BINARY")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise TraefikError(f"GPUPAAS_TRAEFIK_BINARY={override} does not exist")
        return path
    target = cached_binary_path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / ".lock", what="Traefik", tool="traefik", verbose=verbose):
        if target.is_file():
            return target
        if verbose:
            print(
                f"traefik: building Traefik {TRAEFIK_VERSION} into {target} (a cold build takes "
                f"~{COLD_BUILD_MINUTES} minutes on 2 cores)",
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
                f"traefik: built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True
            )
    return target


# ---------------------------------------------------------------------------------------------
# CRDs


def _crd_documents(path: Path) -> list[dict[str, Any]]:
    with path.open() as handle:
        return [
            doc
            for doc in yaml.safe_load_all(handle)
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition"
        ]


def gateway_api_crds() -> list[dict[str, Any]]:
    """The Gateway API's CRDs of :data:`GATEWAY_API_CHANNEL` (its admission policy left out)."""
    folder = (
        module_dir(GATEWAY_API_MODULE, GATEWAY_API_VERSION) / "config/crd" / GATEWAY_API_CHANNEL
    )
    crds: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        crds.extend(_crd_documents(path))
    if not crds:
        raise TraefikError(f"no CRDs in {folder}")
    return crds


def traefik_crds() -> list[dict[str, Any]]:
    crds = _crd_documents(module_dir(TRAEFIK_MODULE, TRAEFIK_VERSION) / TRAEFIK_CRD_FILE)
    if not crds:
        raise TraefikError(f"no CRDs in Traefik's {TRAEFIK_CRD_FILE}")
    return crds


def install_crds(api_client: Any, *, timeout: float = 60.0) -> int:
    """Create (or replace) the Gateway API's and Traefik's CRDs and wait until the API server
    serves them. Returns how many."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    api = client.ApiextensionsV1Api(api_client)
    crds = gateway_api_crds() + traefik_crds()
    for crd in crds:
        name = crd["metadata"]["name"]
        try:
            api.create_custom_resource_definition(crd)
        except ApiException as exc:
            if exc.status != 409:
                raise TraefikError(f"creating CRD {name} failed: {exc.reason}") from exc
            current = api.read_custom_resource_definition(name)
            crd = {
                **crd,
                "metadata": {
                    **crd["metadata"],
                    "resourceVersion": current.metadata.resource_version,
                },
            }
            api.replace_custom_resource_definition(name, crd)
    deadline = time.monotonic() + timeout
    pending = {crd["metadata"]["name"] for crd in crds}
    while pending:
        for name in sorted(pending):
            status = api.read_custom_resource_definition_status(name).status
            conditions = (status.conditions if status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise TraefikError(f"CRDs not established after {timeout:.0f}s: {sorted(pending)}")
        if pending:
            time.sleep(0.2)
    return len(crds)


# ---------------------------------------------------------------------------------------------
# the Gateway


def self_signed_certificate(hostnames: Sequence[str]) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) for ``hostnames``, valid a year: the development Gateway's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostnames[0])])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hostnames]), False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def gateway_objects(
    *,
    port: int,
    tls_port: int | None = None,
    namespace: str = GATEWAY_NAMESPACE,
    name: str = GATEWAY_NAME,
) -> list[dict[str, Any]]:
    """The GatewayClass, the namespace and the Gateway the portal's routes attach to: an HTTP
    listener ``http`` on ``port`` and, with ``tls_port``, an HTTPS listener ``https`` that
    terminates TLS with the certificate in the Secret :data:`TLS_SECRET`. Both accept routes
    from the team namespaces only."""
    allowed = {"namespaces": {"from": "Selector", "selector": ROUTE_NAMESPACE_SELECTOR}}
    listeners: list[dict[str, Any]] = [
        {"name": "http", "protocol": "HTTP", "port": port, "allowedRoutes": allowed}
    ]
    if tls_port is not None:
        listeners.append(
            {
                "name": "https",
                "protocol": "HTTPS",
                "port": tls_port,
                "tls": {
                    "mode": "Terminate",
                    "certificateRefs": [{"kind": "Secret", "name": TLS_SECRET}],
                },
                "allowedRoutes": allowed,
            }
        )
    return [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": GATEWAY_CLASS},
            "spec": {"controllerName": CONTROLLER_NAME},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"gatewayClassName": GATEWAY_CLASS, "listeners": listeners},
        },
    ]


def apply_gateway(
    api_client: Any,
    *,
    port: int,
    tls_port: int | None = None,
    tls_hostnames: Sequence[str] = ("localhost",),
    namespace: str = GATEWAY_NAMESPACE,
    name: str = GATEWAY_NAME,
) -> None:
    """Create or update the Gateway (and its certificate Secret with ``tls_port``)."""
    from kubernetes import dynamic
    from kubernetes.dynamic.exceptions import ConflictError

    dyn = dynamic.DynamicClient(api_client)
    objects = gateway_objects(port=port, tls_port=tls_port, namespace=namespace, name=name)
    if tls_port is not None:
        cert, key = self_signed_certificate(tls_hostnames)
        objects.insert(
            2,
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": TLS_SECRET, "namespace": namespace},
                "type": "kubernetes.io/tls",
                "stringData": {"tls.crt": cert.decode(), "tls.key": key.decode()},
            },
        )
    for obj in objects:
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        ns = obj["metadata"].get("namespace")
        try:
            res.create(body=obj, namespace=ns)
        except ConflictError:
            current = res.get(name=obj["metadata"]["name"], namespace=ns)
            body = {
                **obj,
                "metadata": {
                    **obj["metadata"],
                    "resourceVersion": current.metadata.resourceVersion,
                },
            }
            res.replace(body=body, namespace=ns)


# ---------------------------------------------------------------------------------------------
# running


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command_line(
    binary: Path, *, port: int, tls_port: int | None, ping_port: int, access_log: Path | None
) -> list[str]:
    """Traefik's static configuration as flags: the entry points on loopback, its Gateway API
    and CRD providers (the CRD one serves the Middlewares the routes' ExtensionRef filters
    name), ``/ping`` on its own port, no telemetry of its own."""
    cmd = [
        str(binary),
        f"--entryPoints.web.address=127.0.0.1:{port}",
        f"--entryPoints.ping.address=127.0.0.1:{ping_port}",
        "--ping=true",
        "--ping.entryPoint=ping",
        # Its Prometheus metrics beside /ping (per service: the endpoints' request rates and
        # durations the scaling loop reads, SERVING_RPS_QUERY / SERVING_LATENCY_QUERY).
        "--metrics.prometheus=true",
        "--metrics.prometheus.entryPoint=ping",
        "--providers.kubernetesGateway=true",
        "--providers.kubernetesCRD=true",
        "--global.checkNewVersion=false",
        "--global.sendAnonymousUsage=false",
        "--log.level=INFO",
    ]
    if tls_port is not None:
        cmd.append(f"--entryPoints.websecure.address=127.0.0.1:{tls_port}")
    if access_log is not None:
        cmd += [
            "--accessLog=true",
            f"--accessLog.filePath={access_log}",
            "--accessLog.format=json",
            # Every request's own headers are kept out of the log (cookies, keys, tokens).
            "--accessLog.fields.headers.defaultMode=drop",
        ]
    return cmd


@dataclass
class Traefik:
    """A running Traefik. Use as a context manager or call :meth:`stop`."""

    process: subprocess.Popen[bytes]
    port: int
    tls_port: int | None
    ping_port: int
    log: Path
    access_log: Path | None = None
    kubeconfig: Path | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        """Its Prometheus metrics (on the ping entry point)."""
        return f"http://127.0.0.1:{self.ping_port}/metrics"

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int:
        return terminate(self.process, timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        return _tail(self.log, lines)

    def access_entries(self) -> list[dict[str, Any]]:
        """The access log's entries so far (started with ``access_log=True``): one JSON object
        per request, with the router that served it (``RouterName``) and the status the client
        got (``DownstreamStatus``)."""
        if self.access_log is None or not self.access_log.is_file():
            return []
        entries = []
        for line in self.access_log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
        return entries

    def __enter__(self) -> Traefik:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def start(
    kubeconfig: Path | str,
    work_dir: Path | str,
    *,
    port: int | None = None,
    tls_port: int | None = None,
    tls_hostnames: Sequence[str] = ("localhost",),
    gateway_namespace: str = GATEWAY_NAMESPACE,
    gateway_name: str = GATEWAY_NAME,
    access_log: bool = False,
    timeout: float = DEFAULT_START_TIMEOUT,
) -> Traefik:
    """Apply the Gateway (listeners on ``port`` and ``tls_port``), start Traefik watching the
    cluster of ``kubeconfig`` and wait until it answers ``/ping`` and has taken the Gateway
    (its ``Programmed`` condition). Raises :class:`TraefikError` with the log's tail."""
    from kubernetes import config

    binary = ensure_binary()
    port = port or free_port()
    ping_port = free_port()
    work = Path(work_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        apply_gateway(
            api_client,
            port=port,
            tls_port=tls_port,
            tls_hostnames=tls_hostnames,
            namespace=gateway_namespace,
            name=gateway_name,
        )
        log = work / "traefik.log"
        access = work / "access.log" if access_log else None
        env = {**os.environ, "KUBECONFIG": str(Path(kubeconfig).resolve())}
        for variable in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
            env.pop(variable, None)
        with log.open("ab") as out:
            process = subprocess.Popen(
                command_line(
                    binary, port=port, tls_port=tls_port, ping_port=ping_port, access_log=access
                ),
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proxy = Traefik(
            process=process,
            port=port,
            tls_port=tls_port,
            ping_port=ping_port,
            log=log,
            access_log=access,
            kubeconfig=Path(kubeconfig),
        )
        deadline = time.monotonic() + timeout
        try:
            _wait_ping(proxy, deadline)
            _wait_programmed(api_client, gateway_namespace, gateway_name, proxy, deadline)
        except BaseException:
            proxy.stop()
            raise
        return proxy
    finally:
        api_client.close()


def _wait_ping(proxy: Traefik, deadline: float) -> None:
    url = f"http://127.0.0.1:{proxy.ping_port}/ping"
    while True:
        code = proxy.process.poll()
        if code is not None:
            raise TraefikError(f"traefik exited with {code} before ready\n{proxy.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TraefikError(f"traefik did not answer /ping in time\n{proxy.log_tail()}")
        time.sleep(0.2)


def gateway_conditions(api_client: Any, namespace: str, name: str) -> dict[str, str]:
    """The Gateway's status conditions: type → status."""
    from kubernetes import client

    obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", namespace, "gateways", name
    )
    return {
        str(c.get("type")): str(c.get("status"))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def _wait_programmed(
    api_client: Any, namespace: str, name: str, proxy: Traefik, deadline: float
) -> None:
    while True:
        if gateway_conditions(api_client, namespace, name).get("Programmed") == "True":
            return
        if proxy.process.poll() is not None or time.monotonic() > deadline:
            raise TraefikError(
                f"Gateway {namespace}/{name} not programmed by Traefik\n{proxy.log_tail()}"
            )
        time.sleep(0.3)


def route_conditions(api_client: Any, namespace: str, name: str) -> dict[str, str]:
    """An HTTPRoute's conditions as its parent Gateway's controller set them: type → status."""
    from kubernetes import client

    obj = client.CustomObjectsApi(api_client).get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", namespace, "httproutes", name
    )
    found: dict[str, str] = {}
    for parent in (obj.get("status") or {}).get("parents") or []:
        for condition in parent.get("conditions") or []:
            found[str(condition.get("type"))] = str(condition.get("status"))
    return found


@contextlib.contextmanager
def running(kubeconfig: Path | str, work_dir: Path | str, **kwargs: Any) -> Iterator[Traefik]:
    proxy = start(kubeconfig, work_dir, **kwargs)
    try:
        yield proxy
    finally:
        proxy.stop()


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.traefik", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build Traefik if needed and print the binary path")
    crds = sub.add_parser("crds", help="install the Gateway API's and Traefik's CRDs")
    crds.add_argument("--kubeconfig", required=True)
    up = sub.add_parser("up", help="apply the Gateway and run Traefik until stopped")
    up.add_argument("--kubeconfig", required=True)
    up.add_argument("--port", type=int, default=8890)
    up.add_argument("--tls-port", type=int)
    up.add_argument("--tls-host", action="append", default=[], help="a name the certificate holds")
    up.add_argument("--data-dir", default="var/traefik")
    up.add_argument("--wait", type=float, default=0.0, help="seconds to wait for the kubeconfig")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(ensure_binary())
            return 0
        from kubernetes import config

        if args.command == "crds":
            api_client = config.new_client_from_config(config_file=args.kubeconfig)
            print(f"traefik: {install_crds(api_client)} CRDs installed")
            return 0
        deadline = time.monotonic() + args.wait
        while not Path(args.kubeconfig).is_file() and time.monotonic() < deadline:
            time.sleep(2)
        proxy = start(
            args.kubeconfig,
            args.data_dir,
            port=args.port,
            tls_port=args.tls_port,
            tls_hostnames=args.tls_host or ["localhost", "*.localhost"],
        )
    except TraefikError as exc:
        print(f"traefik: {exc}", file=sys.stderr)
        return 1
    print(f"traefik: serving the Gateway on {proxy.url}", file=sys.stderr, flush=True)
    stop = {"now": False}

    def _stop(*_: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stop["now"] and proxy.running():
        time.sleep(0.5)
    code = proxy.stop()
    return 0 if stop["now"] else code or 1


if __name__ == "__main__":
    raise SystemExit(main())
