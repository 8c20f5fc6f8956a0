from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

import factory
from django.contrib.auth.models import Group, Permission
from factory.django import DjangoModelFactory

from apps.accounts import core as accounts_core
from apps.accounts.models import Membership, Team, User
from apps.accounts.roles import ROLE_GROUPS, Role, admin_permissions
from apps.catalog.models import GpuClass, Image
from apps.quotas.models import TeamQuota
from apps.workloads.models import Workload
from apps.workloads.rules import charged_milli_of


def role_group(role: Role) -> Group:
    """The role's permission group, with the permissions apps/accounts/roles.py gives it (made
    again here: a test that empties the tables takes the migration's groups with it)."""
    group, _ = Group.objects.get_or_create(name=ROLE_GROUPS[role])
    every = {
        f"{p.content_type.app_label}.{p.codename}": p
        for p in Permission.objects.select_related("content_type")
    }
    group.permissions.set([every[label] for label in admin_permissions(role, every)])
    return group


class UserFactory(DjangoModelFactory):
    """A user. ``is_staff=True`` alone still makes a platform admin here (a superuser), as the
    suite has always meant it; a staff user with no role says ``is_superuser=False``.
    ``roles=[Role.AUDITOR, ...]`` gives platform roles, with the staff flag a sign-in gives."""

    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    display_name = factory.LazyAttribute(lambda u: u.username.title())
    is_staff = False
    is_superuser = factory.LazyAttribute(lambda u: bool(u.is_staff))

    @factory.post_generation
    def roles(obj: User, create: bool, extracted: Iterable[Role] | None, **kwargs: object) -> None:
        held = set(extracted or ())
        if not held:
            return
        if Role.ADMIN in held:
            obj.is_superuser = True
        obj.is_staff = True
        obj.save(update_fields=["is_staff", "is_superuser"])
        obj.groups.add(*[role_group(role) for role in held if role in ROLE_GROUPS])


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
