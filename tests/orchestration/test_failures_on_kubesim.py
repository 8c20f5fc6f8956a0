"""How a job's program ending badly reaches people, on the simulated cluster: the exit code at
every door (portal page, API, CLI), and a retry after a failure shown and recorded as one —
never as a preemption, never waiting the preemption grace."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from rest_framework.test import APIClient

from apps.accounts.models import Team, User
from apps.catalog.models import Cluster
from apps.orchestration import services
from apps.orchestration.clusters import forget_clients
from apps.workloads import core as wl
from apps.workloads.models import Workload
from deploy.devtools.kubesim import Kubesim
from gpupaas_cli import output
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]


@pytest.fixture
def cluster(kubesim: Kubesim) -> Cluster:
    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def team(cluster: Cluster, kube_api_client: Any) -> Iterator[Team]:
    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=GpuClassFactory(), limit_milli=8000)
    services.team_namespace_ensure(team=team)
    yield team
    with contextlib.suppress(ApiException):
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)


def started(team: Team, owner: User, **kw: Any) -> Workload:
    workload = WorkloadFactory(
        team=team,
        owner=owner,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        state=wl.ADMITTED,
        placement={"replicas": [{"node": "h100-1"}]},
        **kw,
    )
    assert services.workload_reconcile(workload_id=workload.pk) == "ensured"
    return workload


def member(team: Team) -> User:
    owner = UserFactory()
    team.memberships.create(user=owner)
    return owner


EXITS_3 = {"pod_annotations": {"kubesim.io/exit-code": "3", "kubesim.io/run-duration": "1s"}}


def test_a_program_that_exits_3_ends_failed_with_exit_code_3_at_every_door(
    team: Team, cluster: Cluster
) -> None:
    owner = member(team)
    workload = started(team, owner, params=EXITS_3)

    def ended() -> str | None:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        return workload.state if workload.is_terminal else None

    assert wait_for(ended, timeout=40) == wl.FAILED
    assert (workload.exit_code, workload.last_reason) == (
        3,
        "failed: container main exited with code 3 (Error)",
    )
    api = APIClient()
    api.force_authenticate(owner)
    body = api.get(f"/api/v1/workloads/{workload.pk}/").json()
    assert (body["state"], body["exit_code"]) == (wl.FAILED, 3)
    listed = api.get("/api/v1/workloads/", {"state": "failed"}).json()["results"]
    assert [(w["id"], w["exit_code"]) for w in listed] == [(workload.pk, 3)]
    # What `gpupaas status` prints of that answer.
    assert "exit code  3" in output.workload_details(body)
    portal = Client()
    portal.force_login(owner)
    page = portal.get(f"/workloads/{workload.pk}/").content.decode()
    assert '<dt>Exit code</dt><dd id="exit-code">3</dd>' in page


def test_a_failed_run_with_a_retry_left_is_retried_at_once_then_fails_with_its_exit_code(
    team: Team, cluster: Cluster, settings: Any
) -> None:
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = 3600  # a preemption would hold it an hour
    workload = started(team, member(team), retries=1, params=EXITS_3)
    seen: list[tuple[str, str]] = []

    def ended() -> str | None:
        services.status_sync_pass(cluster=cluster)
        workload.refresh_from_db()
        seen.append((workload.state, workload.last_reason))
        return workload.state if workload.is_terminal else None

    # The Job starts the program again after its back-off (10 s), the status sync follows.
    assert wait_for(ended, timeout=90, every=0.5) == wl.FAILED, seen
    assert workload.exit_code == 3
    assert workload.last_reason == "failed: container main exited with code 3 (Error)"
    reasons = [r for _, r in seen]
    assert any(
        r.startswith("Retry 1 of 1 after a failure: container main exited with code 3")
        for r in reasons
    ), seen
    assert wl.PREEMPTED not in {s for s, _ in seen}
    events = list(workload.events.order_by("created_at", "id").values_list("to_state", "reason"))
    assert wl.PREEMPTED not in {s for s, _ in events}
    retries = [r for _, r in events if r.startswith("Retry 1 of 1 after a failure")]
    assert len(retries) == 1, events  # recorded once
    assert events[-1] == (wl.FAILED, "failed: container main exited with code 3 (Error)")
