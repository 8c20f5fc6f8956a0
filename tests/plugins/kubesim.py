"""pytest fixtures for tests that need the simulated Kubernetes cluster (deploy/kubesim).

Fixtures:

* ``kubesim_binary`` (session): path of the built kubesim binary (built once, cached).
* ``kubesim`` (session): a running cluster, one per pytest process (so one per xdist worker,
  each with its own data dir and free ports). Topology: ``$KUBESIM_TOPOLOGY`` or the default
  topology (deploy/kubesim/topologies/default.yaml).
* ``kube_api_client`` (session): a ``kubernetes.client.ApiClient`` for that cluster.
* ``k8s_namespace`` (function): the name of a fresh namespace whose ``default``
  ServiceAccount exists; deleted afterwards (background propagation, not waited for: the
  namespace controller needs 5-10 s; the fake kubelet frees the pods' resources at once).

Tests using them must carry ``@pytest.mark.kubesim``; the marker is also added automatically
so ``-m "not kubesim"`` always deselects them. When the Go toolchain is missing (and no
binary is cached) the fixture fails; with ``KUBESIM_SKIP=1`` it skips instead.

``KUBESIM_REAL_NODES=1`` starts the cluster with real nodes (the pools marked real in
``$KUBESIM_TOPOLOGY``, default topologies/realnodes.yaml): upstream kubelets with containerd
that really run pods (deploy/devtools/kubesim.py ``start(real_nodes=True)``). Tests that need
them carry ``@pytest.mark.realnode`` and use the ``real_nodes`` fixture; deploy/test.sh runs
them in a pass of their own, the rest of the suite stays on fake nodes.

``KUBESIM_IDENTITY=chart`` runs the portal as the Helm chart's ServiceAccount instead of the
cluster admin: the chart's RBAC (release ``gpupaas`` in namespace ``gpupaas``) is applied,
a token is made for the ServiceAccount (TokenRequest API), and ``kubesim.kubeconfig`` holds
that token. ``kube_api_client`` and ``k8s_namespace`` stay the admin's; a ``k8s_namespace``
is then made a team namespace (label and RoleBinding, as the portal makes them). The portal's
settings must name the same identity: ``K8S_PORTAL_SERVICE_ACCOUNT=gpupaas/gpupaas`` and
``K8S_PORTAL_TEAM_ROLE=gpupaas-team`` (deploy/test.sh sets all three).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from deploy.devtools import kubesim as ks

FIXTURES = frozenset(
    {"kubesim", "kube_api_client", "k8s_namespace", "kubesim_binary", "real_nodes"}
)
NAMESPACE_TIMEOUT = 90.0

# The chart's identity under KUBESIM_IDENTITY=chart (release "gpupaas" in namespace "gpupaas").
CHART_RELEASE = "gpupaas"
CHART_NAMESPACE = "gpupaas"
CHART_SERVICE_ACCOUNT = "gpupaas"
CHART_TEAM_ROLE = "gpupaas-team"
RBAC_TEMPLATES = ("templates/serviceaccount.yaml", "templates/rbac.yaml")


def with_real_nodes() -> bool:
    return os.environ.get("KUBESIM_REAL_NODES", "") == "1"


def as_chart_identity() -> bool:
    return os.environ.get("KUBESIM_IDENTITY", "admin") == "chart"


def admin_kubeconfig(cluster: ks.Kubesim) -> Path:
    return cluster.data_dir / "admin.kubeconfig"


def render_chart(*args: str) -> list[dict[str, Any]]:
    """``helm template`` of deploy/helm/gpupaas (helm built on first use) as parsed documents."""
    from deploy.devtools import helm

    command = [str(helm.ensure_binary()), "template", *args, str(helm.CHART_DIR)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def apply_manifests(
    api_client: client.ApiClient, docs: list[dict[str, Any]], *, dry_run: bool = False
) -> list[dict[str, Any]]:
    """Server-side apply (``dryRun=All`` with ``dry_run``) of each document, as the client's
    identity. Returns what the API server answered."""
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(api_client)
    answers = []
    for doc in docs:
        res = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        extra = {"dry_run": "All"} if dry_run else {}
        answer = res.server_side_apply(
            body=doc,
            name=doc["metadata"]["name"],
            namespace=doc["metadata"].get("namespace") if res.namespaced else None,
            field_manager="gpupaas-tests",
            force_conflicts=True,
            **extra,
        )
        answers.append(answer.to_dict())
    return answers


def service_account_kubeconfig(cluster: ks.Kubesim, namespace: str, name: str, path: Path) -> Path:
    """A kubeconfig for ServiceAccount ``namespace/name`` of ``cluster`` (a token from the
    TokenRequest API, valid a day), written to ``path``."""
    admin = config.new_client_from_config(config_file=str(admin_kubeconfig(cluster)))
    try:
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=86400)
        )
        token = (
            client.CoreV1Api(admin)
            .create_namespaced_service_account_token(name, namespace, request)
            .status.token
        )
    finally:
        admin.close()
    admin_config = yaml.safe_load(admin_kubeconfig(cluster).read_text())
    ca = admin_config["clusters"][0]["cluster"]["certificate-authority-data"]
    base64.b64decode(ca)  # it is there and well-formed
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kubesim",
                "cluster": {"server": cluster.server, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "kubesim", "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(kubeconfig))
    path.chmod(0o600)
    return path


def install_chart_rbac(cluster: ks.Kubesim) -> None:
    """The chart's ServiceAccount, roles, bindings and admission policy, applied as admin."""
    admin = config.new_client_from_config(config_file=str(admin_kubeconfig(cluster)))
    try:
        core = client.CoreV1Api(admin)
        try:
            core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=CHART_NAMESPACE))
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
        show = [arg for template in RBAC_TEMPLATES for arg in ("--show-only", template)]
        docs = render_chart(CHART_RELEASE, "--namespace", CHART_NAMESPACE, *show)
        apply_manifests(admin, docs)
    finally:
        admin.close()
    _wait_for_admission_policy(cluster)


def _wait_for_admission_policy(cluster: ks.Kubesim, timeout: float = 30.0) -> None:
    """A new ValidatingAdmissionPolicy takes effect about a second after it is stored: wait
    until it refuses the portal a RoleBinding in kube-system (asked with dryRun)."""
    path = service_account_kubeconfig(
        cluster, CHART_NAMESPACE, CHART_SERVICE_ACCOUNT, cluster.data_dir / "probe.kubeconfig"
    )
    api = config.new_client_from_config(config_file=str(path))
    binding = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="gpupaas-probe"),
        role_ref=client.V1RoleRef(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=CHART_TEAM_ROLE
        ),
        subjects=[
            client.RbacV1Subject(
                kind="ServiceAccount", name=CHART_SERVICE_ACCOUNT, namespace=CHART_NAMESPACE
            )
        ],
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
                    "kube-system", binding, dry_run="All"
                )
            except ApiException as exc:
                if "gpupaas-portal-scope" in str(exc.body):
                    return
                raise
            if time.monotonic() > deadline:
                raise AssertionError(f"the admission policy was not in effect after {timeout} s")
            time.sleep(0.2)
    finally:
        api.close()


def portal_view(cluster: ks.Kubesim) -> ks.Kubesim:
    """``cluster`` as the portal sees it: itself, or (KUBESIM_IDENTITY=chart) with
    ``kubeconfig`` holding the chart's ServiceAccount token."""
    if not as_chart_identity():
        return cluster
    wanted = {
        "K8S_PORTAL_SERVICE_ACCOUNT": f"{CHART_NAMESPACE}/{CHART_SERVICE_ACCOUNT}",
        "K8S_PORTAL_TEAM_ROLE": CHART_TEAM_ROLE,
    }
    wrong = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    if wrong:
        pytest.fail(
            "KUBESIM_IDENTITY=chart needs the portal configured for the chart's identity: "
            + " ".join(f"{k}={v}" for k, v in wrong.items()),
            pytrace=False,
        )
    install_chart_rbac(cluster)
    path = service_account_kubeconfig(
        cluster, CHART_NAMESPACE, CHART_SERVICE_ACCOUNT, cluster.data_dir / "portal.kubeconfig"
    )
    return dataclasses.replace(cluster, kubeconfig=path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip_real = pytest.mark.skip(
        reason="needs real nodes: KUBESIM_REAL_NODES=1 (deploy/test.sh runs these in the "
        "real-node pass; the cluster of this run has fake nodes only)"
    )
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        if FIXTURES.intersection(fixturenames) and item.get_closest_marker("kubesim") is None:
            item.add_marker(pytest.mark.kubesim)
        if item.get_closest_marker("realnode") is not None and not with_real_nodes():
            item.add_marker(skip_real)


def _unavailable(reason: str) -> None:
    if os.environ.get("KUBESIM_SKIP") == "1":
        pytest.skip(f"kubesim unavailable (KUBESIM_SKIP=1): {reason}")
    pytest.fail(
        f"kubesim unavailable: {reason}\n(set KUBESIM_SKIP=1 to skip kubesim tests instead)",
        pytrace=False,
    )


@pytest.fixture(scope="session")
def kubesim_binary() -> Path:
    """The kubesim binary, built on first use (file-locked, so xdist workers build it once)."""
    try:
        return ks.ensure_binary()
    except ks.ToolchainMissingError as exc:
        missing = str(exc)
    _unavailable(missing)
    raise AssertionError("unreachable: _unavailable skips or fails")


@pytest.fixture(scope="session")
def kubesim(kubesim_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ks.Kubesim]:
    """A running kubesim cluster for this pytest process."""
    topology_env = os.environ.get("KUBESIM_TOPOLOGY")
    topology = Path(topology_env) if topology_env else None
    data_dir = tmp_path_factory.mktemp("kubesim")
    timeout = float(os.environ.get("KUBESIM_START_TIMEOUT", ks.DEFAULT_START_TIMEOUT))
    real = with_real_nodes()
    if real:
        problem = ks.real_nodes_unavailable()
        if problem:
            _unavailable(f"KUBESIM_REAL_NODES=1 but {problem}")
    cluster = ks.start(data_dir, topology=topology, timeout=timeout, real_nodes=real)
    try:
        yield portal_view(cluster)
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def real_nodes(kubesim: ks.Kubesim) -> list[dict[str, Any]]:
    """The real nodes of the session's cluster (READY's ``real.nodes``: name, ip, pod_subnet,
    dir, kubelet_pid_file). Fails when the cluster was started without them."""
    if not kubesim.real:
        pytest.fail(
            "this test needs real nodes: run it with KUBESIM_REAL_NODES=1 "
            "(deploy/test.sh does, in the real-node pass)",
            pytrace=False,
        )
    return list(kubesim.real["nodes"])


@pytest.fixture(scope="session")
def kube_api_client(kubesim: ks.Kubesim) -> Iterator[client.ApiClient]:
    """``kubernetes.client.ApiClient`` configured from the cluster's admin kubeconfig."""
    api_client = config.new_client_from_config(config_file=str(admin_kubeconfig(kubesim)))
    try:
        yield api_client
    finally:
        api_client.close()


def _unique_namespace(nodeid: str) -> str:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    base = re.sub(r"[^a-z0-9]+", "-", nodeid.rsplit("::", 1)[-1].lower()).strip("-")[:30]
    return f"t-{worker}-{base}-{uuid.uuid4().hex[:8]}".replace("--", "-")[:63].rstrip("-")


@pytest.fixture
def k8s_namespace(
    kube_api_client: client.ApiClient, request: pytest.FixtureRequest
) -> Iterator[str]:
    """Name of a fresh namespace with its ``default`` ServiceAccount; deleted afterwards.

    The namespace is labelled ``kubesim.io/test=true``. Deletion is not waited for.
    """
    core = client.CoreV1Api(kube_api_client)
    name = _unique_namespace(request.node.nodeid)
    labels = {"kubesim.io/test": "true"}
    if as_chart_identity():
        labels["app.kubernetes.io/managed-by"] = "gpupaas"
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    if as_chart_identity():
        _bind_portal(kube_api_client, name)
    deadline = time.monotonic() + NAMESPACE_TIMEOUT
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except ApiException as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise


def _bind_portal(api_client: client.ApiClient, namespace: str) -> None:
    """What the portal does for a team namespace it creates, done by the admin for a test's."""
    client.RbacAuthorizationV1Api(api_client).create_namespaced_role_binding(
        namespace,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="gpupaas-portal"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=CHART_TEAM_ROLE
            ),
            subjects=[
                client.RbacV1Subject(
                    kind="ServiceAccount", name=CHART_SERVICE_ACCOUNT, namespace=CHART_NAMESPACE
                )
            ],
        ),
    )
