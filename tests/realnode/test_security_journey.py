"""The platform's security settings, for real: training jobs submitted through the API run on
the real nodes' kubelet and runc, which enforce what the portal's manifests ask (uid 1000 and
no capabilities whatever user the image names, a read-only root filesystem where the catalog
marks the image so, no service account token), and the portal tells the user what happened in
the API (the workload's state, exit code and archived log)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client as k8s

from apps.accounts.models import Team, User
from apps.catalog.models import GpuClass, Image
from apps.workloads.models import Workload
from tests.realnode.conftest import TRAINING_IMAGE, Api, Drive, pods_of

pytestmark = [pytest.mark.kubesim, pytest.mark.realnode]

TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


@pytest.fixture
def read_only_training(catalog: dict[str, Image]) -> Image:
    """The training image, marked in the catalog as one that runs with a read-only root."""
    image, _ = Image.objects.update_or_create(
        name="PyTorch training (read-only root)",
        defaults={
            "reference": TRAINING_IMAGE,
            "kind": Image.Kind.TRAINING,
            "read_only_root": True,
        },
    )
    return image


def submit(api: Api, user: User, team: Team, l4: GpuClass, image: Image, command: list[str]) -> int:
    body = {
        "kind": "training",
        "name": "probe",
        "team": team.slug,
        "gpu_class": l4.name,
        "image": image.name,
        "gpu_milli": 1000,
        "command": command,
        "retries": 0,
    }
    created = api(user).post("/api/v1/workloads/", body, "json")
    assert created.status_code == 201, created.json()
    return int(created.json()["id"])


def ended(api: Api, user: User, workload_id: int) -> Any:
    """The workload as the API shows it, once it has ended and its objects are archived and
    gone (None before)."""
    shown = api(user).get(f"/api/v1/workloads/{workload_id}/").json()
    if shown["state"] not in ("succeeded", "failed", "cancelled", "expired"):
        return None
    if Workload.objects.get(pk=workload_id).k8s_objects:
        return None
    return shown


def archived_log(api: Api, user: User, workload_id: int) -> str:
    answer = api(user).get(f"/api/v1/workloads/{workload_id}/logs/", {"tail": 200})
    assert answer.status_code == 200, answer.content
    return answer.getvalue().decode()


def test_an_image_built_to_run_as_root_runs_as_uid_1000_without_capabilities(
    api: Api,
    drive: Drive,
    kube_api_client: k8s.ApiClient,
    team: Team,
    member: User,
    l4: GpuClass,
    catalog: dict[str, Image],
) -> None:
    # The image's USER is root; the portal's pods run as uid 1000 (runAsUser, runAsNonRoot, all
    # capabilities dropped), so the kubelet starts it as that user and it cannot act as root.
    workload_id = submit(api, member, team, l4, catalog["root"], ["/opt/gpupaas/try-write-root.sh"])
    workload = Workload.objects.get(pk=workload_id)

    def started() -> Any:
        pods = pods_of(kube_api_client, workload)
        return pods[0] if pods and pods[0].status.phase in ("Running", "Succeeded") else None

    pod = drive(started, timeout=240, every=2)
    security = pod.spec.security_context
    assert (security.run_as_user, security.run_as_non_root) == (1000, True)
    shown = drive(lambda: ended(api, member, workload_id), timeout=240, every=2)
    assert shown["state"] == "succeeded", shown
    log = archived_log(api, member, workload_id)
    assert "identity: uid=1000" in log, log
    assert "capabilities: effective 0000000000000000" in log, log
    (summary,) = [line for line in log.splitlines() if "summary:" in line]
    assert "uid=1000 root-write=denied etc-write=denied" in summary, summary


def test_a_job_writing_a_read_only_root_fails_with_the_programs_own_error_in_its_log(
    api: Api,
    drive: Drive,
    team: Team,
    member: User,
    l4: GpuClass,
    read_only_training: Image,
) -> None:
    script = (
        "import os\n"
        "open('/tmp/scratch', 'w').write('tmp is writable')\n"
        "print('tmp:', open('/tmp/scratch').read(), flush=True)\n"
        "open('/etc/written', 'w').write('x')\n"
    )
    workload_id = submit(api, member, team, l4, read_only_training, ["python3", "-c", script])
    shown = drive(lambda: ended(api, member, workload_id), timeout=240, every=2)
    assert shown["state"] == "failed", shown
    assert shown["exit_code"] == 1, shown
    log = archived_log(api, member, workload_id)
    assert "tmp: tmp is writable" in log, log
    assert "OSError: [Errno 30] Read-only file system: '/etc/written'" in log, log


def test_a_job_finds_no_service_account_token_and_runs_as_its_own_user(
    api: Api,
    drive: Drive,
    team: Team,
    member: User,
    l4: GpuClass,
    catalog: dict[str, Image],
) -> None:
    workload_id = submit(
        api, member, team, l4, catalog["training"], ["/opt/gpupaas/try-write-root.sh"]
    )
    shown = drive(lambda: ended(api, member, workload_id), timeout=240, every=2)
    assert shown["state"] == "succeeded", shown
    log = archived_log(api, member, workload_id)
    assert f"service account token: absent ({TOKEN} does not exist)" in log, log
    (summary,) = [line for line in log.splitlines() if "summary:" in line]
    assert "token=absent" in summary and "uid=1000" in summary, summary
    # Not root, so / and /etc are not its to write (the image's root filesystem is writable).
    assert "root-write=denied" in summary and "etc-write=denied" in summary, summary
