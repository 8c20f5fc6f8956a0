from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.audit.models import AuditEvent
from apps.catalog.models import Cluster, GpuClass, Image

pytestmark = pytest.mark.django_db


def gpu_class_form(**overrides: Any) -> dict[str, Any]:
    data = {
        "name": "A100-80GB",
        "product_label": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": "81920",
        "hourly_cost": "2.9",
        "capacity_gpus": "16",
        "enabled": "on",
        "description": "",
        "sharing_mode": "whole",
        "timeslice_replicas": "",
        "mig_profiles": "[]",
        "hami_split_count": "",
        "allocation_mode": "device_plugin",
        "quotas-TOTAL_FORMS": "0",
        "quotas-INITIAL_FORMS": "0",
    }
    data.update(overrides)
    return data


def test_admin_creates_a_mig_class_and_audits_it(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/catalog/gpuclass/add/",
        gpu_class_form(sharing_mode="mig", mig_profiles='["1g.10gb", "3g.40gb"]'),
    )
    assert response.status_code == 302
    gpu_class = GpuClass.objects.get(name="A100-80GB")
    assert gpu_class.mig_profiles == ["1g.10gb", "3g.40gb"]
    assert AuditEvent.objects.filter(action="gpuclass.create", object_id=str(gpu_class.pk)).exists()


def test_admin_switches_a_class_to_dynamic_resource_allocation(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/catalog/gpuclass/add/", gpu_class_form(allocation_mode="dra")
    )
    assert response.status_code == 302
    gpu_class = GpuClass.objects.get(name="A100-80GB")
    assert gpu_class.spec().allocation_mode == "dra"
    listing = admin_client.get("/admin/catalog/gpuclass/").content.decode()
    assert "Dynamic Resource Allocation (ResourceClaims)" in listing


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sharing_mode": "timeslice"}, "at least 2 replicas"),
        ({"sharing_mode": "whole", "timeslice_replicas": "4"}, "only to the time-slicing"),
        ({"sharing_mode": "mig", "mig_profiles": '["huge"]'}, "Not MIG profiles"),
        ({"sharing_mode": "mig", "mig_profiles": '"1g.10gb"'}, "list of names"),
        ({"sharing_mode": "hami"}, "deviceSplitCount"),
        (
            {"sharing_mode": "hami", "hami_split_count": "4", "allocation_mode": "dra"},
            "allocated by HAMi&#x27;s device plugin",
        ),
        ({"memory_mib": "-5"}, "greater than or equal to"),
        ({"memory_mib": "1.5"}, "Enter a whole number"),
        ({"hourly_cost": "-1"}, "greater than or equal to 0"),
    ],
)
def test_admin_refuses_parameters_that_do_not_fit(
    admin_client: Client, overrides: dict[str, str], message: str
) -> None:
    response = admin_client.post("/admin/catalog/gpuclass/add/", gpu_class_form(**overrides))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not GpuClass.objects.exists()


def test_admin_refuses_bad_image_reference(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/catalog/image/add/",
        {"name": "x", "reference": "Not A Ref", "kind": "any", "description": ""},
    )
    assert response.status_code == 200
    assert "Not a container image reference" in response.content.decode()
    assert not Image.objects.exists()


def test_admin_refuses_kubeconfig_cluster_without_path(admin_client: Client) -> None:
    response = admin_client.post(
        "/admin/catalog/cluster/add/",
        {
            "name": "prod",
            "connection": "kubeconfig",
            "kubeconfig_path": "",
            "role": "hub",
            "kubeconfig_context": "",
            "enabled": "on",
        },
    )
    assert response.status_code == 200
    assert "needs the path" in response.content.decode()
    assert not Cluster.objects.exists()


def test_non_staff_cannot_open_admin(cast: Any) -> None:
    client = Client()
    client.force_login(cast.owner)
    response = client.get("/admin/catalog/gpuclass/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
