"""The nodes' cluster DNS: CoreDNS built from deploy/coredns, with the Corefile of
``deploy.devtools.coredns.corefile``, answering from the simulated cluster's API server.

The Services have no selector and hand-written EndpointSlices, so nothing but the API objects
decides the answers. The DNS queries are built by hand (RFC 1035) and sent over UDP.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from deploy.devtools import coredns as cd
from deploy.devtools import kubesim as ks
from tests.plugins.kubesim import admin_kubeconfig

TYPE_A = 1
CLASS_IN = 1
RCODE_NOERROR = 0
RCODE_NXDOMAIN = 3
# Two addresses on no network of this machine: only the EndpointSlices can name them.
SERVICE_ENDPOINT = "10.244.7.5"
JOB_ENDPOINT = "10.244.7.9"


@pytest.fixture(scope="session")
def coredns_binary() -> Path:
    """The CoreDNS binary, built on first use (file-locked: parallel callers build it once)."""
    try:
        return cd.ensure_binary()
    except cd.ToolchainMissingError as exc:
        missing = str(exc)
    if os.environ.get("COREDNS_SKIP") == "1":
        pytest.skip(f"CoreDNS unavailable (COREDNS_SKIP=1): {missing}")
    pytest.fail(
        f"CoreDNS unavailable: {missing}\n(set COREDNS_SKIP=1 to skip the CoreDNS tests instead)",
        pytrace=False,
    )


def _free_port() -> int:
    """A port free for both TCP and UDP on 127.0.0.1 (CoreDNS listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise AssertionError("no port free for both TCP and UDP on 127.0.0.1")


@dataclass(frozen=True)
class Answer:
    rcode: int
    authoritative: bool
    addresses: tuple[str, ...]


def _encode_name(name: str) -> bytes:
    out = b""
    for label in name.rstrip(".").split("."):
        raw = label.encode("ascii")
        assert 0 < len(raw) < 64, name
        out += bytes([len(raw)]) + raw
    return out + b"\0"


def _skip_name(message: bytes, offset: int) -> int:
    """The offset just past the (possibly compressed) name at ``offset``."""
    while True:
        length = message[offset]
        if length & 0xC0 == 0xC0:  # a pointer ends the name
            return offset + 2
        offset += 1
        if length == 0:
            return offset
        offset += length


def query_a(server: tuple[str, int], name: str, *, attempts: int = 3) -> Answer:
    """An A query for ``name`` (recursion desired) over UDP; the answer's A records."""
    qid = secrets.randbelow(1 << 16)
    question = _encode_name(name) + struct.pack("!HH", TYPE_A, CLASS_IN)
    packet = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2.0)
        for _ in range(attempts):
            sock.sendto(packet, server)
            try:
                message, _ = sock.recvfrom(4096)
            except TimeoutError:
                continue
            rid, flags, qdcount, ancount, _ns, _ar = struct.unpack_from("!HHHHHH", message)
            if rid != qid:
                continue
            offset = 12
            for _ in range(qdcount):
                offset = _skip_name(message, offset) + 4
            addresses = []
            for _ in range(ancount):
                offset = _skip_name(message, offset)
                rtype, _rclass, _ttl, rdlength = struct.unpack_from("!HHIH", message, offset)
                offset += 10
                if rtype == TYPE_A:
                    addresses.append(str(ipaddress.IPv4Address(message[offset : offset + 4])))
                offset += rdlength
            return Answer(
                rcode=flags & 0x000F, authoritative=bool(flags & 0x0400), addresses=tuple(addresses)
            )
    raise AssertionError(f"no answer from {server} for {name} after {attempts} tries")


def _service(name: str, *, headless: bool) -> client.V1Service:
    return client.V1Service(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1ServiceSpec(
            cluster_ip="None" if headless else None,
            ports=[client.V1ServicePort(name="http", port=80, target_port=8080, protocol="TCP")],
        ),
    )


def _slice(service: str, address: str, *, hostname: str | None = None) -> client.V1EndpointSlice:
    return client.V1EndpointSlice(
        metadata=client.V1ObjectMeta(
            name=f"{service}-manual",
            labels={
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "gpupaas-tests",
            },
        ),
        address_type="IPv4",
        endpoints=[
            client.V1Endpoint(
                addresses=[address],
                hostname=hostname,
                conditions=client.V1EndpointConditions(ready=True),
            )
        ],
        ports=[client.DiscoveryV1EndpointPort(name="http", port=8080, protocol="TCP")],
    )


@pytest.fixture
def dns_server(
    coredns_binary: Path, kubesim: ks.Kubesim, tmp_path: Path
) -> Iterator[tuple[str, int]]:
    """CoreDNS on 127.0.0.1, reading the cluster as its admin; (address, port)."""
    port, health_port, ready_port = _free_port(), _free_port(), _free_port()
    text = cd.corefile(
        listen=f"127.0.0.1:{port}",
        kubeconfig=str(admin_kubeconfig(kubesim)),
        health_port=health_port,
        ready_port=ready_port,
    )
    server = cd.start(text, tmp_path / "coredns", ready_port=ready_port)
    try:
        yield ("127.0.0.1", port)
    finally:
        code = server.stop()
        print(f"coredns exit {code}; log tail:\n{server.log_tail()}")


def _wait_for(server: tuple[str, int], name: str, timeout: float = 15.0) -> Answer:
    """The first answer with addresses (the informers may lag the objects by a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = query_a(server, name)
        if answer.addresses or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


@pytest.mark.kubesim
def test_cluster_names_resolve_from_the_api_server(
    coredns_binary: Path,
    kube_api_client: client.ApiClient,
    k8s_namespace: str,
    dns_server: tuple[str, int],
) -> None:
    """Objects made after CoreDNS came up: its watches, not its first list, answer."""
    core = client.CoreV1Api(kube_api_client)
    discovery = client.DiscoveryV1Api(kube_api_client)
    web = core.create_namespaced_service(k8s_namespace, _service("web", headless=False))
    discovery.create_namespaced_endpoint_slice(k8s_namespace, _slice("web", SERVICE_ENDPOINT))
    core.create_namespaced_service(k8s_namespace, _service("workers", headless=True))
    discovery.create_namespaced_endpoint_slice(
        k8s_namespace, _slice("workers", JOB_ENDPOINT, hostname="job-0")
    )
    cluster_ip = web.spec.cluster_ip
    assert ipaddress.ip_address(cluster_ip)

    service = _wait_for(dns_server, f"web.{k8s_namespace}.svc.cluster.local")
    assert (service.rcode, service.addresses) == (RCODE_NOERROR, (cluster_ip,))
    assert service.authoritative

    job = _wait_for(dns_server, f"job-0.workers.{k8s_namespace}.svc.cluster.local")
    assert (job.rcode, job.addresses) == (RCODE_NOERROR, (JOB_ENDPOINT,))

    # The headless Service's own name answers its endpoints; the ClusterIP one never does.
    headless = _wait_for(dns_server, f"workers.{k8s_namespace}.svc.cluster.local")
    assert headless.addresses == (JOB_ENDPOINT,)

    unknown = query_a(dns_server, f"absent.{k8s_namespace}.svc.cluster.local")
    assert (unknown.rcode, unknown.addresses) == (RCODE_NXDOMAIN, ())
    assert unknown.authoritative


def test_corefile_is_the_nodes_dns_config() -> None:
    text = cd.corefile(
        listen="10.250.0.1:53",
        kubeconfig="/var/lib/node dns/kubeconfig",
        health_port=8080,
        ready_port=8181,
    )
    assert text == (
        ".:53 {\n"
        "    bind 10.250.0.1\n"
        "    errors\n"
        "    health 127.0.0.1:8080\n"
        "    ready 127.0.0.1:8181\n"
        "    kubernetes cluster.local in-addr.arpa ip6.arpa {\n"
        '        kubeconfig "/var/lib/node dns/kubeconfig"\n'
        "        pods insecure\n"
        "        fallthrough in-addr.arpa ip6.arpa\n"
        "        ttl 5\n"
        "    }\n"
        "    forward . /etc/resolv.conf\n"
        "    cache 5\n"
        "    loop\n"
        "}\n"
    )


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"listen": "localhost:53"}, "IP address"),
        ({"listen": "127.0.0.1:70000"}, "out of range"),
        ({"cluster_domain": "cluster local"}, "domain"),
        ({"kubeconfig": 'a"b'}, "Corefile"),
        ({"health_port": 0}, "health_port"),
    ],
)
def test_corefile_refuses_what_it_cannot_write(kwargs: dict[str, object], complaint: str) -> None:
    args: dict[str, object] = {
        "listen": "127.0.0.1:1053",
        "kubeconfig": "/k",
        "health_port": 8080,
        "ready_port": 8181,
        **kwargs,
    }
    with pytest.raises(ValueError, match=complaint):
        cd.corefile(**args)  # type: ignore[arg-type]


def test_a_second_build_says_whose_build_it_waits_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = tmp_path / ".lock"
    entered = threading.Event()

    def second() -> None:
        with cd._build_lock(lock, verbose=True):
            entered.set()

    with cd._build_lock(lock, verbose=False):
        assert lock.read_text() == f"{os.getpid()}\n"
        waiter = threading.Thread(target=second)
        waiter.start()
        err, deadline = "", time.monotonic() + 10
        while "waiting" not in err and time.monotonic() < deadline:
            time.sleep(0.05)
            err += capsys.readouterr().err
        assert f"waiting for another build of CoreDNS (lock held by pid {os.getpid()})" in err
        assert not entered.is_set()
    waiter.join(timeout=10)
    assert entered.is_set()
