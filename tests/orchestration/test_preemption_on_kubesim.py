"""Checkpoint and resume on the simulated cluster, through the real path: a running training
job preempted by a higher class gets its class's grace period (the same number in the
scheduler, the pod and the message), returns to the queue, and starts again with the same
checkpoint directory, knowing it is a restart."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from kubernetes import client as k8s

from apps.accounts.models import Membership, Team
from apps.catalog.models import Cluster
from apps.orchestration import manifests as m
from apps.orchestration import services
from apps.quotas.models import TeamQuota
from apps.scheduling.services import scheduling_cycle_run
from apps.workloads import core as wl
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.services import workload_submit
from tests.factories import GpuClassFactory, ImageFactory, UserFactory
from tests.orchestration.test_on_kubesim import cluster, core_api, team  # noqa: F401 - fixtures
from tests.waiting import wait_for

pytestmark = [pytest.mark.kubesim, pytest.mark.django_db]
GRACE = 3


def pods_of(api: k8s.CoreV1Api, workload: Workload) -> list[Any]:
    selector = f"{m.LABEL_WORKLOAD}={workload.pk}"
    return list(api.list_namespaced_pod(workload.team.namespace, label_selector=selector).items)


def env_of(pod: Any) -> dict[str, str]:
    return {e.name: e.value for e in pod.spec.containers[0].env or [] if e.value is not None}


def run_until(workload: Workload, on: Cluster, state: str, timeout: float = 40) -> None:
    def reached() -> bool:
        services.status_sync_pass(cluster=on)
        workload.refresh_from_db()
        return workload.state == state

    wait_for(reached, timeout=timeout)


def submit(team: Team, actor: Any, name: str, priority: str, runs: str) -> Workload:  # noqa: F811
    """A one-GPU H100 training job of ``priority`` that runs ``runs`` on kubesim."""
    return workload_submit(
        actor=actor,
        team=team,
        gpu_class=GpuClassFactory(),
        image=ImageFactory(),
        request=WorkloadRequest.of(
            kind="training",
            name=name,
            gpu_milli=1000,
            priority_class=priority,
            command=["python", "train.py"],
            params={"pod_annotations": {"kubesim.io/run-duration": runs}},
        ),
    )


def test_preempted_training_job_requeues_and_resumes_from_the_same_checkpoint(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = 0
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = GRACE
    h100 = GpuClassFactory()
    # One GPU of quota: the production job can only run if the training job makes room.
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=1000, limit_milli=1000
    )
    services.cluster_inventory_sync(cluster=cluster)
    member, lead = UserFactory(), UserFactory()
    team.memberships.create(user=member)
    team.memberships.create(user=lead, role=Membership.Role.LEAD)

    training = submit(team, member, "long-run", wl.PRIORITY_TRAINING, "10m")
    scheduling_cycle_run()
    training.refresh_from_db()
    assert training.state == wl.ADMITTED, training.last_reason
    services.workload_reconcile(workload_id=training.pk)
    run_until(training, cluster, wl.RUNNING)
    (first,) = pods_of(core_api, training)
    first_env = env_of(first)
    assert first_env["GPUPAAS_RESTART_COUNT"] == "0"
    assert first.spec.termination_grace_period_seconds == GRACE

    urgent = submit(team, lead, "hotfix", wl.PRIORITY_PRODUCTION, "2s")
    now = timezone.now()
    run = scheduling_cycle_run(now=now)
    assert run.preempted == (training.pk,) and run.admitted == (urgent.pk,)
    training.refresh_from_db()
    assert training.state == wl.PREEMPTED
    assert f"It has {GRACE} s to save a checkpoint, then returns to the queue." in (
        training.last_reason
    )
    # Not before the grace period the pod was given.
    assert scheduling_cycle_run(now=now + timedelta(seconds=GRACE - 1)).requeued == ()

    services.workload_reconcile(workload_id=training.pk)  # its objects go
    wait_for(lambda: not pods_of(core_api, training), timeout=30)
    services.workload_reconcile(workload_id=urgent.pk)
    run_until(urgent, cluster, wl.SUCCEEDED)

    assert scheduling_cycle_run(now=now + timedelta(seconds=GRACE)).requeued == (training.pk,)
    run = scheduling_cycle_run()
    assert run.admitted == (training.pk,), training.last_reason
    services.workload_reconcile(workload_id=training.pk)
    run_until(training, cluster, wl.RUNNING)
    (again,) = pods_of(core_api, training)
    assert again.metadata.uid != first.metadata.uid
    again_env = env_of(again)
    assert again_env["GPUPAAS_RESTART_COUNT"] == "1"
    assert again_env["GPUPAAS_CHECKPOINT_DIR"] == first_env["GPUPAAS_CHECKPOINT_DIR"]
    assert again_env["GPUPAAS_OUTPUT_DIR"] == first_env["GPUPAAS_OUTPUT_DIR"]
    assert again_env["GPUPAAS_CHECKPOINT_DIR"].startswith("/team/checkpoints/")
    assert again.spec.termination_grace_period_seconds == GRACE


def test_the_workload_preempted_for_starts_only_once_the_cluster_released_the_gpus(
    team: Team,  # noqa: F811 - the fixture
    cluster: Cluster,  # noqa: F811 - the fixture
    core_api: k8s.CoreV1Api,  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    """Admission never runs ahead of the cluster: the beneficiary of a preemption is admitted at
    once, but its pods are created only when the victim's pods are gone and the namespace's
    ResourceQuota (which counts a pod until it is gone) shows room, so the cluster never
    refuses them ("exceeded quota")."""
    settings.SCHEDULING_MIN_RUNTIME_TRAINING_SECONDS = 0
    settings.SCHEDULING_PREEMPTION_GRACE_SECONDS = GRACE
    h100 = GpuClassFactory()
    TeamQuota.objects.filter(team=team, gpu_class=h100).update(
        guaranteed_milli=1000, limit_milli=1000
    )
    services.team_namespace_ensure(team=team)  # the ResourceQuota now says one GPU too

    def quota_hard() -> dict[str, str]:
        quota = core_api.read_namespaced_resource_quota(m.QUOTA_NAME, team.namespace)
        return dict((quota.status and quota.status.hard) or {})

    wait_for(lambda: quota_hard().get("requests.nvidia.com/gpu") == "1", timeout=20)
    services.cluster_inventory_sync(cluster=cluster)
    member, lead = UserFactory(), UserFactory()
    team.memberships.create(user=member)
    team.memberships.create(user=lead, role=Membership.Role.LEAD)

    victim = submit(team, member, "long-run", wl.PRIORITY_TRAINING, "10m")
    scheduling_cycle_run()
    services.workload_reconcile(workload_id=victim.pk)
    run_until(victim, cluster, wl.RUNNING)

    urgent = submit(team, lead, "hotfix", wl.PRIORITY_PRODUCTION, "2s")
    run = scheduling_cycle_run()
    assert run.preempted == (victim.pk,) and run.admitted == (urgent.pk,)
    urgent.refresh_from_db()
    assert urgent.placement.get("waits_for") == [victim.pk]
    # The victim's pod still holds the GPU: nothing of the beneficiary is created yet.
    assert services.workload_reconcile(workload_id=urgent.pk) == "waiting"
    urgent.refresh_from_db()
    assert urgent.k8s_objects == [] and not pods_of(core_api, urgent)
    assert urgent.last_reason.startswith("Admitted; waiting for 1 pod(s) of the 1 workload(s)")

    services.workload_reconcile(workload_id=victim.pk)  # its objects go
    # Then created as soon as the cluster shows the GPU free (the quota may lag a moment).
    assert wait_for(
        lambda: services.workload_reconcile(workload_id=urgent.pk) == "ensured", timeout=30
    )
    run_until(urgent, cluster, wl.SUCCEEDED)
    refused = [
        e.message
        for e in core_api.list_namespaced_event(team.namespace).items
        if e.reason == "FailedCreate" or "exceeded quota" in (e.message or "")
    ]
    assert refused == []
