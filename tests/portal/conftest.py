"""Fixtures for the portal: the cast plus a small catalog (a MIG class, notebook and training
images) and signed-in clients for each role."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from apps.catalog.models import GpuClass, Image
from apps.workloads.models import Workload
from tests.factories import ImageFactory, TeamQuotaFactory, WorkloadFactory
from tests.plugins.cast import Cast


@dataclass
class Portal:
    cast: Cast
    mig: GpuClass
    notebook_image: Image
    training_image: Image

    def client(self, user: object) -> Client:
        client = Client()
        client.force_login(user)  # type: ignore[arg-type]
        return client

    def workload(self, **kw: object) -> Workload:
        values: dict[str, object] = {
            "team": self.cast.team,
            "owner": self.cast.owner,
            "gpu_class": self.cast.gpu_class,
            "image": self.training_image,
        }
        values.update(kw)
        return WorkloadFactory(**values)


@pytest.fixture
def portal(cast: Cast) -> Portal:
    mig = GpuClass.objects.create(
        name="A100-80GB-MIG",
        product_label="NVIDIA-A100-SXM4-80GB",
        memory_mib=81920,
        sharing_mode=GpuClass.Sharing.MIG,
        mig_profiles=["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"],
        capacity_gpus=16,
    )
    TeamQuotaFactory(team=cast.team, gpu_class=mig, guaranteed_milli=2000, limit_milli=4000)
    return Portal(
        cast=cast,
        mig=mig,
        notebook_image=ImageFactory(
            name="JupyterLab",
            reference="quay.io/jupyter/pytorch-notebook:2024-12-02",
            kind=Image.Kind.NOTEBOOK,
        ),
        training_image=ImageFactory(
            name="PyTorch", reference="nvcr.io/nvidia/pytorch:24.12-py3", kind=Image.Kind.TRAINING
        ),
    )
