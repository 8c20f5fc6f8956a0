"""Real nodes in kubesim: pods really run, on upstream kubelets with containerd and runc.

These tests talk to the cluster only through the Kubernetes API (the official client), as a
user of any cluster would: what they assert is what the kubelet, containerd, runc, the CNI
bridge, kube-proxy and CoreDNS did. They need ``KUBESIM_REAL_NODES=1`` (deploy/test.sh runs
them in the real-node pass).
"""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode]

BASE = "gpupaas.local/base:1"
ROOT_IMAGE = "gpupaas.local/runs-as-root:1"
CATALOG_REFERENCES = (
    "quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02",
    "nvcr.io/nvidia/pytorch:24.12-py3",
    "docker.io/vllm/vllm-openai:v0.6.4",
)


def _security(**extra: Any) -> client.V1SecurityContext:
    return client.V1SecurityContext(
        run_as_non_root=True,
        allow_privilege_escalation=False,
        capabilities=client.V1Capabilities(drop=["ALL"]),
        seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        **extra,
    )


def pod(
    name: str,
    node: str,
    command: list[str],
    *,
    image: str = BASE,
    labels: dict[str, str] | None = None,
    restart: str = "Never",
    memory: str = "128Mi",
    security: client.V1SecurityContext | None = None,
    hostname: str | None = None,
    subdomain: str | None = None,
    grace: int = 30,
    volumes: list[client.V1Volume] | None = None,
    mounts: list[client.V1VolumeMount] | None = None,
    ports: list[client.V1ContainerPort] | None = None,
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            restart_policy=restart,
            node_selector={"kubernetes.io/hostname": node},
            automount_service_account_token=False,
            termination_grace_period_seconds=grace,
            hostname=hostname,
            subdomain=subdomain,
            volumes=volumes,
            containers=[
                client.V1Container(
                    name="main",
                    image=image,
                    image_pull_policy="IfNotPresent",
                    command=command,
                    security_context=security or _security(),
                    resources=client.V1ResourceRequirements(
                        requests={"cpu": "10m", "memory": "32Mi"},
                        limits={"memory": memory},
                    ),
                    volume_mounts=mounts,
                    ports=ports,
                )
            ],
        ),
    )


def finished(core: client.CoreV1Api, ns: str, name: str, timeout: float = 120) -> client.V1Pod:
    def check() -> client.V1Pod | None:
        p = core.read_namespaced_pod(name, ns)
        return p if p.status.phase in ("Succeeded", "Failed") else None

    return wait_for(check, timeout=timeout, every=0.5)


def running(core: client.CoreV1Api, ns: str, name: str, timeout: float = 120) -> client.V1Pod:
    def check() -> client.V1Pod | None:
        p = core.read_namespaced_pod(name, ns)
        ready = any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
        return p if p.status.phase == "Running" and ready else None

    return wait_for(check, timeout=timeout, every=0.5)


def terminated(p: client.V1Pod) -> client.V1ContainerStateTerminated:
    state = p.status.container_statuses[0].state
    assert state.terminated is not None, state
    return state.terminated


@pytest.fixture
def core(kube_api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api_client)


def test_real_nodes_register_with_simulated_gpus_and_the_catalog_images(
    core: client.CoreV1Api, real_nodes: list[dict[str, Any]]
) -> None:
    assert len(real_nodes) >= 2
    for info in real_nodes:
        node = core.read_node(info["name"])
        assert node.metadata.annotations["kubesim.io/node"] == "real"
        assert node.status.node_info.kubelet_version == "v1.36.3"
        assert node.status.node_info.container_runtime_version.startswith("containerd://1.6")
        assert {a.type: a.address for a in node.status.addresses}["InternalIP"] == info["ip"]
        assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-L4"
        assert node.status.allocatable["nvidia.com/gpu"] == "2"
        ready = {c.type: c.status for c in node.status.conditions}
        assert ready["Ready"] == "True", node.status.conditions
        names = {n for image in node.status.images for n in image.names}
        for reference in CATALOG_REFERENCES:
            assert reference in names, sorted(names)


def test_a_pod_really_runs_and_its_log_is_its_own_stdout(
    core: client.CoreV1Api, k8s_namespace: str, real_nodes: list[dict[str, Any]]
) -> None:
    node = real_nodes[0]["name"]
    script = "import sys, os; print('sum', sum(range(1000)), 'uid', os.getuid()); sys.exit(3)"
    core.create_namespaced_pod(k8s_namespace, pod("compute", node, ["python3", "-c", script]))
    p = finished(core, k8s_namespace, "compute")
    assert p.spec.node_name == node
    assert p.status.phase == "Failed"
    assert terminated(p).exit_code == 3
    log = core.read_namespaced_pod_log("compute", k8s_namespace)
    assert log.strip() == "sum 499500 uid 1000"


def test_services_and_cluster_dns_route_between_pods_on_two_nodes(
    core: client.CoreV1Api, k8s_namespace: str, real_nodes: list[dict[str, Any]]
) -> None:
    server_node, client_node = real_nodes[0]["name"], real_nodes[1]["name"]
    serve = (
        "import http.server, socketserver\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        body = ('hello from ' + self.path).encode()\n"
        "        self.send_response(200); self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers(); self.wfile.write(body)\n"
        "socketserver.TCPServer.allow_reuse_address = True\n"
        "http.server.ThreadingHTTPServer(('0.0.0.0', 8080), H).serve_forever()\n"
    )
    labels = {"app": "echo"}
    core.create_namespaced_pod(
        k8s_namespace,
        pod(
            "echo-0",
            server_node,
            ["python3", "-c", serve],
            labels=labels,
            restart="Always",
            hostname="echo-0",
            subdomain="echo-peers",
            ports=[client.V1ContainerPort(container_port=8080)],
        ),
    )
    core.create_namespaced_service(
        k8s_namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="echo"),
            spec=client.V1ServiceSpec(
                selector=labels, ports=[client.V1ServicePort(port=80, target_port=8080)]
            ),
        ),
    )
    core.create_namespaced_service(
        k8s_namespace,
        client.V1Service(
            metadata=client.V1ObjectMeta(name="echo-peers"),
            spec=client.V1ServiceSpec(
                cluster_ip="None",
                selector=labels,
                publish_not_ready_addresses=True,
                ports=[client.V1ServicePort(port=8080)],
            ),
        ),
    )
    server = running(core, k8s_namespace, "echo-0")
    # The host reaches the pod network (as a gateway on the cluster's edge does).
    with urllib.request.urlopen(f"http://{server.status.pod_ip}:8080/direct", timeout=10) as r:
        assert r.read() == b"hello from /direct"
    fetch = (
        "import urllib.request, time\n"
        "for url in ('http://echo/cluster-ip', 'http://echo-0.echo-peers:8080/headless'):\n"
        "    for attempt in range(60):\n"
        "        try:\n"
        "            print(urllib.request.urlopen(url, timeout=3).read().decode()); break\n"
        "        except OSError as exc:\n"
        "            last = exc; time.sleep(0.5)\n"
        "    else:\n"
        "        raise SystemExit(f'{url}: {last}')\n"
    )
    core.create_namespaced_pod(k8s_namespace, pod("fetch", client_node, ["python3", "-c", fetch]))
    p = finished(core, k8s_namespace, "fetch")
    log = core.read_namespaced_pod_log("fetch", k8s_namespace)
    assert p.status.phase == "Succeeded", log
    assert log.split("\n")[:2] == ["hello from /cluster-ip", "hello from /headless"]
    assert p.status.pod_ip != server.status.pod_ip


def test_the_kubelet_enforces_the_security_settings(
    core: client.CoreV1Api, k8s_namespace: str, real_nodes: list[dict[str, Any]]
) -> None:
    node = real_nodes[0]["name"]
    core.create_namespaced_pod(k8s_namespace, pod("as-root", node, ["id"], image=ROOT_IMAGE))

    def refused() -> str | None:
        statuses = core.read_namespaced_pod("as-root", k8s_namespace).status.container_statuses
        waiting = statuses and statuses[0].state.waiting
        if waiting and waiting.reason == "CreateContainerConfigError":
            return waiting.message
        return None

    message = wait_for(refused, timeout=60)
    assert "runAsNonRoot" in message and "root" in message
    probe = (
        "import os\n"
        "try:\n"
        "    open('/etc/written', 'w').write('x'); print('root filesystem: writable')\n"
        "except OSError as exc:\n"
        "    print('root filesystem:', exc.strerror)\n"
        "token = '/var/run/secrets/kubernetes.io/serviceaccount/token'\n"
        "print('token:', 'present' if os.path.exists(token) else 'absent')\n"
        "print('uid:', os.getuid())\n"
    )
    core.create_namespaced_pod(
        k8s_namespace,
        pod(
            "locked",
            node,
            ["python3", "-c", probe],
            security=_security(read_only_root_filesystem=True, run_as_user=1000),
        ),
    )
    finished(core, k8s_namespace, "locked")
    log = core.read_namespaced_pod_log("locked", k8s_namespace).splitlines()
    assert log == ["root filesystem: Read-only file system", "token: absent", "uid: 1000"]


def test_sigterm_arrives_with_the_grace_period_and_an_oom_kill_is_reported(
    core: client.CoreV1Api, k8s_namespace: str, real_nodes: list[dict[str, Any]]
) -> None:
    node = real_nodes[1]["name"]
    trap = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        "    print('got SIGTERM, saving', flush=True); time.sleep(1); print('saved', flush=True)\n"
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('working', flush=True)\n"
        "time.sleep(600)\n"
    )
    core.create_namespaced_pod(
        k8s_namespace, pod("trap", node, ["python3", "-c", trap], grace=20, restart="Always")
    )
    running(core, k8s_namespace, "trap")
    wait_for(lambda: "working" in core.read_namespaced_pod_log("trap", k8s_namespace))
    hog = "b = bytearray(400 * 1024 * 1024); print('allocated', len(b))"
    core.create_namespaced_pod(
        k8s_namespace, pod("hog", node, ["python3", "-c", hog], memory="64Mi")
    )
    started = time.monotonic()
    core.delete_namespaced_pod("trap", k8s_namespace, grace_period_seconds=20)
    lines: list[str] = []

    def saved() -> bool:
        try:
            lines[:] = core.read_namespaced_pod_log("trap", k8s_namespace).splitlines()
        except ApiException:
            return False
        return "saved" in lines

    wait_for(saved, timeout=20, every=0.2)
    assert lines == ["working", "got SIGTERM, saving", "saved"]
    assert time.monotonic() - started < 20
    p = finished(core, k8s_namespace, "hog")
    t = terminated(p)
    assert (t.reason, t.exit_code) == ("OOMKilled", 137)


def test_a_volume_written_on_one_node_is_read_on_another(
    core: client.CoreV1Api, k8s_namespace: str, real_nodes: list[dict[str, Any]]
) -> None:
    core.create_namespaced_persistent_volume_claim(
        k8s_namespace,
        client.V1PersistentVolumeClaim(
            metadata=client.V1ObjectMeta(name="shared"),
            spec=client.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteMany"],
                resources=client.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        ),
    )
    volume = [
        client.V1Volume(
            name="data",
            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name="shared"),
        )
    ]
    mount = [client.V1VolumeMount(name="data", mount_path="/data")]
    write = "open('/data/checkpoint.txt', 'w').write('step 42')"
    read = "print(open('/data/checkpoint.txt').read())"
    for name, node, script in (
        ("writer", real_nodes[0]["name"], write),
        ("reader", real_nodes[1]["name"], read),
    ):
        core.create_namespaced_pod(
            k8s_namespace,
            pod(name, node, ["python3", "-c", script], volumes=volume, mounts=mount),
        )
        p = finished(core, k8s_namespace, name)
        assert p.status.phase == "Succeeded", core.read_namespaced_pod_log(name, k8s_namespace)
    assert core.read_namespaced_pod_log("reader", k8s_namespace).strip() == "step 42"
