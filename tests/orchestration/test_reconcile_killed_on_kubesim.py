"""Concurrent object creation keeps its promise: a worker killed in the middle of a pass
leaves exactly one object per workload once the next pass has run (real API server, real
PostgreSQL, a real process killed with SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from apps.accounts.models import Team
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = 60

PASS = """
import django
django.setup()
from apps.catalog.models import Cluster
from apps.orchestration import services
services.reconcile_pass(cluster=Cluster.objects.get(pk={cluster_id}))
"""


@pytest.fixture
def team(kubesim: Kubesim, kube_api_client: Any) -> Iterator[Team]:
    forget_clients()
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=10**6)
    Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))
    services.team_namespace_ensure(team=team)
    yield team
    core = k8s.CoreV1Api(kube_api_client)
    with contextlib.suppress(ApiException):
        core.delete_namespace(team.namespace)
    # Sixty Jobs take a while to go: wait, so that the next test finds the GPUs free.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            core.read_namespace(team.namespace)
        except ApiException:
            break
        time.sleep(0.5)


def jobs_per_workload(kube_api_client: Any, namespace: str) -> Counter[str]:
    jobs = k8s.BatchV1Api(kube_api_client).list_namespaced_job(
        namespace, label_selector=m.LABEL_WORKLOAD
    )
    return Counter(j.metadata.labels[m.LABEL_WORKLOAD] for j in jobs.items)


def test_a_worker_killed_mid_pass_leaves_one_object_per_workload(
    team: Team, kube_api_client: Any
) -> None:
    owner, gpu_class, image = UserFactory(), GpuClassFactory(), ImageFactory()
    ids = [
        WorkloadFactory(
            team=team,
            owner=owner,
            gpu_class=gpu_class,
            image=image,
            state=wl.ADMITTED,
            # Short-lived pods: the shared simulated cluster's GPUs are free again at once.
            params={"pod_annotations": {"kubesim.io/run-duration": "1s"}},
        ).pk
        for _ in range(WORKLOADS)
    ]
    cluster = Cluster.objects.get()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpupaas.settings.test",
        "DATABASE_URL": "postgres://{USER}:{PASSWORD}@{HOST}:{PORT}/{NAME}".format(
            **connection.settings_dict
        ),
        "ORCHESTRATION_RECONCILE_CONCURRENCY": "8",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "cli")]),
    }
    worker = subprocess.Popen(
        [sys.executable, "-c", PASS.format(cluster_id=cluster.pk)], env=env, cwd=REPO
    )
    try:
        deadline = time.monotonic() + 120
        while sum(jobs_per_workload(kube_api_client, team.namespace).values()) < 5:
            assert worker.poll() is None, "the pass ended before it could be killed"
            assert time.monotonic() < deadline, "the worker created nothing"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
    finally:
        worker.wait(30)
    created = jobs_per_workload(kube_api_client, team.namespace)
    assert 0 < sum(created.values()) < WORKLOADS  # killed in the middle

    with override_settings(ORCHESTRATION_RECONCILE_CONCURRENCY=8):
        result = services.reconcile_pass(cluster=cluster)
    # The cluster is shared with the process's other tests: the pass also sees their objects as
    # orphans of this database, and may not be allowed to delete them (as the chart's
    # ServiceAccount, in a namespace it has no binding in). Only this team's objects count.
    others = re.compile(r"^[A-Za-z]+ (?!" + re.escape(team.namespace) + r"/)[a-z0-9-]+/[^ :]+: ")
    assert not [e for e in result.errors if not others.match(e)] and not result.unreachable
    assert jobs_per_workload(kube_api_client, team.namespace) == Counter({str(pk): 1 for pk in ids})
    for workload in Workload.objects.filter(pk__in=ids):
        assert workload.state == wl.STARTING
        assert [r["kind"] for r in workload.k8s_objects] == ["Job"]
    # A second pass finds everything in place and creates nothing.
    with override_settings(ORCHESTRATION_RECONCILE_CONCURRENCY=8):
        again = services.reconcile_pass(cluster=cluster)
    assert again.created == 0
    assert sum(jobs_per_workload(kube_api_client, team.namespace).values()) == WORKLOADS
