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
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from deploy.devtools import kubesim as ks

FIXTURES = frozenset({"kubesim", "kube_api_client", "k8s_namespace", "kubesim_binary"})
NAMESPACE_TIMEOUT = 90.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        if FIXTURES.intersection(fixturenames) and item.get_closest_marker("kubesim") is None:
            item.add_marker(pytest.mark.kubesim)


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
    cluster = ks.start(data_dir, topology=topology, timeout=timeout)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kube_api_client(kubesim: ks.Kubesim) -> Iterator[client.ApiClient]:
    """``kubernetes.client.ApiClient`` configured from the cluster's admin kubeconfig."""
    api_client = config.new_client_from_config(config_file=str(kubesim.kubeconfig))
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
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels={"kubesim.io/test": "true"})
        )
    )
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
