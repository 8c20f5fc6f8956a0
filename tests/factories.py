from __future__ import annotations

from decimal import Decimal

import factory
from factory.django import DjangoModelFactory

from apps.accounts import core as accounts_core
from apps.accounts.models import Membership, Team, User
from apps.catalog.models import GpuClass, Image
from apps.quotas.models import TeamQuota
from apps.workloads.models import Workload
from apps.workloads.rules import charged_milli_of


class UserFactory(DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    display_name = factory.LazyAttribute(lambda u: u.username.title())


class TeamFactory(DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.LazyAttribute(lambda t: accounts_core.slug_from_name(t.name))
    namespace = factory.LazyAttribute(lambda t: accounts_core.namespace_for_slug(t.slug))
    idp_group = factory.LazyAttribute(lambda t: f"gpupaas-team-{t.slug}")


class MembershipFactory(DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Membership.Role.MEMBER


class GpuClassFactory(DjangoModelFactory):
    class Meta:
        model = GpuClass
        django_get_or_create = ("name",)

    name = "H100-80GB"
    product_label = "NVIDIA-H100-80GB-HBM3"
    memory_mib = 81559
    sharing_mode = GpuClass.Sharing.WHOLE
    hourly_cost = Decimal("4.5")
    capacity_gpus = 32


class ImageFactory(DjangoModelFactory):
    class Meta:
        model = Image
        django_get_or_create = ("name",)

    name = "PyTorch training"
    reference = "nvcr.io/nvidia/pytorch:24.12-py3"
    kind = Image.Kind.ANY


class TeamQuotaFactory(DjangoModelFactory):
    class Meta:
        model = TeamQuota

    team = factory.SubFactory(TeamFactory)
    gpu_class = factory.SubFactory(GpuClassFactory)
    guaranteed_milli = 4000
    limit_milli = 8000


class WorkloadFactory(DjangoModelFactory):
    class Meta:
        model = Workload

    name = factory.Sequence(lambda n: f"job-{n}")
    kind = Workload.Kind.TRAINING
    owner = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    gpu_class = factory.SubFactory(GpuClassFactory)
    image = factory.SubFactory(ImageFactory)
    gpu_milli = 1000
    replicas = 1
    # What submit records: what the class grants one replica.
    charged_milli = factory.LazyAttribute(lambda w: charged_milli_of(w.gpu_milli, w.gpu_class))
    priority_class = Workload.Priority.TRAINING
    # A request as the rules accept it: jobs and sweeps name their program, notebooks do not.
    command = factory.LazyAttribute(
        lambda w: [] if w.kind == Workload.Kind.NOTEBOOK else ["python", "train.py"]
    )
