"""Every write the Django admin can make goes through a service.

The walk posts to every change form, inline, action, delete page and to the user admin's
password and staff screens, as an admin in a browser would (the form's own fields, read from
the rendered page, with a few values changed), and finds the audit event each write leaves,
with the admin as actor and their address. Quota changes also queue the refresh of the team's
ResourceQuota; on the simulated cluster, running what was queued makes the ResourceQuota
follow. An admin registration that can write but is not walked fails
``test_every_admin_write_path_is_walked``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.auth.models import Group, Permission
from django.db import models
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils import timezone

from apps.accounts import core as accounts_core
from apps.accounts.models import ApiToken, Membership, OidcIdentity, Team, User
from apps.accounts.services import api_token_create
from apps.audit.models import AuditEvent
from apps.catalog.models import Cluster, ClusterNode, GpuClass, Image, NodeMaintenance
from apps.common.taskqueue import TaskRef
from apps.datasets.models import Dataset
from apps.quotas.models import TeamQuota
from apps.telemetry.models import IdlePolicy, UsageDay
from apps.workloads import core as wl
from tests.factories import (
    GpuClassFactory,
    ImageFactory,
    TeamFactory,
    TeamQuotaFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

CLIENT_IP = "127.0.0.1"  # the test client's REMOTE_ADDR
ENSURE = "orchestration.team_namespace_ensure"
CLUSTER_SETUP = "orchestration.cluster_setup"


# --- the admin's forms, as a browser submits them -------------------------------------------


class _FormReader(HTMLParser):
    """The fields a browser would submit from the admin's main form (``id="<model>_form"``),
    and the empty inline rows (``__prefix__``) its script copies to add a row."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found = False
        self.in_form = False
        self.fields: list[tuple[str, str]] = []
        self.templates: list[tuple[str, str]] = []
        self._select: tuple[str, bool, bool] | None = None  # name, multiple, disabled
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None
        self._text: list[str] = []

    def _add(self, name: str, value: str) -> None:
        (self.templates if "__prefix__" in name else self.fields).append((name, value))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("id", "").endswith("_form"):
            self.found = self.in_form = True
        if not self.in_form:
            return
        name, disabled = a.get("name", ""), "disabled" in a
        if tag == "input" and name and not disabled:
            kind = a.get("type", "text").lower()
            if kind in {"submit", "button", "image", "reset", "file"}:
                return
            if kind in {"checkbox", "radio"}:
                if "checked" in a:
                    self._add(name, a.get("value") or "on")
                return
            self._add(name, a.get("value", ""))
        elif tag == "select" and name:
            self._select = (name, "multiple" in a, disabled)
            self._options = []
        elif tag == "option" and self._select is not None:
            self._options.append((a.get("value", ""), "selected" in a))
        elif tag == "textarea" and name and not disabled:
            self._textarea, self._text = name, []

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.in_form:
            self.in_form = False
        elif tag == "select" and self._select is not None:
            name, multiple, disabled = self._select
            chosen = [v for v, selected in self._options if selected]
            if not chosen and not multiple and self._options:
                chosen = [self._options[0][0]]  # a browser submits the first option
            if not disabled:
                for value in chosen:
                    self._add(name, value)
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            self._add(self._textarea, "".join(self._text).removeprefix("\n"))
            self._textarea = None


@dataclass
class AdminForm:
    client: Client
    url: str
    data: dict[str, list[str]]
    templates: dict[str, str]

    @classmethod
    def open(cls, client: Client, url: str) -> AdminForm:
        page = client.get(url)
        assert page.status_code == 200, f"GET {url}: {page.status_code}"
        reader = _FormReader()
        reader.feed(page.content.decode())
        assert reader.found, f"no admin form on {url}"
        data: dict[str, list[str]] = {}
        for name, value in reader.fields:
            data.setdefault(name, []).append(value)
        return cls(client, url, data, dict(reader.templates))

    def set(self, **values: Any) -> AdminForm:
        for name, value in values.items():
            if value is None or value is False:
                self.data.pop(name, None)  # an unticked box is not submitted
            elif isinstance(value, list | tuple):
                self.data[name] = [str(v) for v in value]
            else:
                self.data[name] = ["on" if value is True else str(value)]
        return self

    def row(self, prefix: str, obj: models.Model) -> str:
        """The prefix of the inline row showing ``obj``."""
        total = int(self.data[f"{prefix}-TOTAL_FORMS"][0])
        for n in range(total):
            if self.data.get(f"{prefix}-{n}-id") == [str(obj.pk)]:
                return f"{prefix}-{n}"
        raise AssertionError(f"{obj!r} is not a row of {prefix} on {self.url}")

    def change_row(self, prefix: str, obj: models.Model, **values: Any) -> AdminForm:
        row = self.row(prefix, obj)
        return self.set(**{f"{row}-{k}": v for k, v in values.items()})

    def delete_row(self, prefix: str, obj: models.Model) -> AdminForm:
        return self.set(**{f"{self.row(prefix, obj)}-DELETE": True})

    def add_row(self, prefix: str, **values: Any) -> AdminForm:
        """A new row as the page's script makes it: the empty row copied, then filled in."""
        n = int(self.data[f"{prefix}-TOTAL_FORMS"][0])
        self.set(**{f"{prefix}-TOTAL_FORMS": n + 1})
        marker = f"{prefix}-__prefix__-"
        for name, value in self.templates.items():
            if name.startswith(marker):
                self.data[name.replace("__prefix__", str(n))] = [value]
        return self.set(**{f"{prefix}-{n}-{k}": v for k, v in values.items()})

    def submit(self) -> HttpResponse:
        response = self.client.post(self.url, {**self.data, "_save": "Save"})
        assert response.status_code == 302, _errors(response)
        return response


def _errors(response: HttpResponse) -> str:
    body = response.content.decode()
    start = body.find("errornote")
    return f"{response.status_code}: {body[start : start + 2000] if start >= 0 else body[:500]}"


def url(model: type[models.Model] | models.Model, view: str, *args: Any) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


# --- the walk -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    action: str
    object_type: str
    object_id: str


def event(action: str, obj: models.Model) -> Event:
    """The event ``action`` on ``obj`` (its id taken now, before a deletion clears it)."""
    return Event(action, obj._meta.label_lower, str(obj.pk))


@dataclass
class Outcome:
    events: list[Event]
    queued: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)


@dataclass
class Walk:
    client: Client
    cast: Cast
    team: Team  # the team whose quotas the quota paths change

    @property
    def h100(self) -> GpuClass:
        return self.cast.gpu_class

    @property
    def a100(self) -> GpuClass:
        """A second whole-GPU class: its quota adds to the same Kubernetes resource."""
        return GpuClassFactory(
            name="A100-80GB", product_label="NVIDIA-A100-SXM4-80GB", memory_mib=81920
        )

    def quota(self, gpu_class: GpuClass) -> TeamQuota:
        return TeamQuota.objects.get(team=self.team, gpu_class=gpu_class)

    def form(self, target: type[models.Model] | models.Model, view: str = "change") -> AdminForm:
        if isinstance(target, models.Model):
            return AdminForm.open(self.client, url(target, view, target.pk))
        return AdminForm.open(self.client, url(target, view))

    def delete(self, obj: models.Model) -> None:
        response = self.client.post(url(obj, "delete", obj.pk), {"post": "yes"})
        assert response.status_code == 302, _errors(response)

    def action(self, name: str, objs: list[Any]) -> HttpResponse:
        data: dict[str, Any] = {"action": name, "_selected_action": [o.pk for o in objs]}
        if name == "delete_selected":
            data["post"] = "yes"  # the confirmation page's answer
        response = self.client.post(url(objs[0], "changelist"), data)
        assert response.status_code == 302, _errors(response)
        return response

    def ensure(self) -> list[tuple[str, tuple[Any, ...]]]:
        return [(ENSURE, (self.team.pk,))]


Setup = Callable[[Walk], Any]
Run = Callable[[Walk, Any], Outcome]


@dataclass(frozen=True)
class Case:
    path: str  # <model label>:<add|change|delete|password|action:NAME|inline:LABEL:WHAT>
    setup: Setup
    run: Run
    # For quota paths: the team's ResourceQuota once the change has reached the cluster
    # (the team starts with 4-8 H100 GPUs; ``setup`` may add 2 A100 GPUs).
    hard: dict[str, str] | None = None


CASES: dict[str, Case] = {}


def case(
    path: str, *, variant: str = "", setup: Setup = lambda w: None, hard: int | None = None
) -> Callable[[Run], Run]:
    def register(run: Run) -> Run:
        key = f"{path}[{variant}]" if variant else path
        assert key not in CASES, key
        CASES[key] = Case(
            path,
            setup,
            run,
            None if hard is None else {"requests.nvidia.com/gpu": str(hard)},
        )
        return run

    return register


def with_a100_quota(w: Walk) -> TeamQuota:
    return TeamQuotaFactory(team=w.team, gpu_class=w.a100, guaranteed_milli=1000, limit_milli=2000)


# catalog.gpuclass


@case("catalog.gpuclass:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(GpuClass, "add").set(
        name="L40S-48GB",
        product_label="NVIDIA-L40S",
        memory_mib=46068,
        hourly_cost="1.8",
        capacity_gpus=8,
        sharing_mode="whole",
    ).submit()
    return Outcome([event("gpuclass.create", GpuClass.objects.get(name="L40S-48GB"))])


@case("catalog.gpuclass:change")
def _(w: Walk, _: Any) -> Outcome:
    w.form(w.h100).set(capacity_gpus=40).submit()
    assert GpuClass.objects.get(pk=w.h100.pk).capacity_gpus == 40
    return Outcome([event("gpuclass.update", w.h100)])


@case(
    "catalog.gpuclass:change",
    variant="sharing",
    setup=lambda w: Cluster.objects.create(name="hub", kubeconfig_path="/etc/kube/hub"),
)
def _(w: Walk, cluster: Cluster) -> Outcome:
    # New resource names for every quota of the class: every team's namespace is applied again.
    w.form(w.h100).set(sharing_mode="timeslice", timeslice_replicas=4).submit()
    return Outcome([event("gpuclass.update", w.h100)], [(CLUSTER_SETUP, (cluster.pk,))])


@case("catalog.gpuclass:delete", setup=lambda w: GpuClassFactory(name="T4"))
def _(w: Walk, t4: GpuClass) -> Outcome:
    expected = event("gpuclass.delete", t4)
    w.delete(t4)
    assert not GpuClass.objects.filter(name="T4").exists()
    return Outcome([expected])


@case(
    "catalog.gpuclass:action:delete_selected",
    setup=lambda w: [GpuClassFactory(name="T4"), GpuClassFactory(name="V100")],
)
def _(w: Walk, classes: list[GpuClass]) -> Outcome:
    expected = [event("gpuclass.delete", c) for c in classes]
    w.action("delete_selected", classes)
    return Outcome(expected)


@case("catalog.gpuclass:action:disable")
def _(w: Walk, _: Any) -> Outcome:
    w.action("disable", [w.h100])
    assert not GpuClass.objects.get(pk=w.h100.pk).enabled
    return Outcome([event("gpuclass.disable", w.h100)])


@case("catalog.gpuclass:action:enable", setup=lambda w: GpuClassFactory(name="T4", enabled=False))
def _(w: Walk, t4: GpuClass) -> Outcome:
    w.action("enable", [t4, w.h100])  # the H100 is enabled already: nothing to record
    assert GpuClass.objects.get(pk=t4.pk).enabled
    return Outcome([event("gpuclass.enable", t4)])


@case("catalog.gpuclass:inline:quotas.teamquota:add", hard=10)
def _(w: Walk, _: Any) -> Outcome:
    w.form(w.a100).add_row(
        "quotas", team=w.team.pk, guaranteed_milli=1000, limit_milli=2000
    ).submit()
    return Outcome([event("quota.create", w.quota(w.a100))], w.ensure())


@case("catalog.gpuclass:inline:quotas.teamquota:change", hard=12)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    w.form(w.h100).change_row("quotas", quota, limit_milli=12000).submit()
    assert w.quota(w.h100).limit_milli == 12000
    return Outcome([event("quota.update", quota)], w.ensure())


@case("catalog.gpuclass:inline:quotas.teamquota:delete", setup=with_a100_quota, hard=2)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    expected = event("quota.delete", quota)
    w.form(w.h100).delete_row("quotas", quota).submit()
    assert not TeamQuota.objects.filter(pk=quota.pk).exists()
    return Outcome([expected], w.ensure())


# catalog.image


@case("catalog.image:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(Image, "add").set(name="JAX", reference="ghcr.io/example/jax:0.4.30").submit()
    return Outcome([event("image.create", Image.objects.get(name="JAX"))])


@case("catalog.image:change")
def _(w: Walk, _: Any) -> Outcome:
    image = w.cast.image
    w.form(image).set(description="CUDA 12.6, PyTorch 2.6").submit()
    return Outcome([event("image.update", image)])


@case("catalog.image:delete", setup=lambda w: ImageFactory(name="Old", reference="old:1"))
def _(w: Walk, image: Image) -> Outcome:
    expected = event("image.delete", image)
    w.delete(image)
    return Outcome([expected])


@case(
    "catalog.image:action:delete_selected",
    setup=lambda w: [ImageFactory(name="Old", reference="old:1"), ImageFactory(name="Older")],
)
def _(w: Walk, images: list[Image]) -> Outcome:
    expected = [event("image.delete", i) for i in images]
    w.action("delete_selected", images)
    return Outcome(expected)


# datasets.dataset


@case("datasets.dataset:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(Dataset, "add").set(
        team=str(w.team.pk), name="imagenet", kind="claim", claim="imagenet-pvc"
    ).submit()
    return Outcome([event("dataset.register", Dataset.objects.get(name="imagenet"))])


def a_dataset(w: Walk, name: str = "imagenet") -> Dataset:
    return Dataset.objects.create(team=w.team, name=name, kind="claim", claim=f"{name}-pvc")


@case("datasets.dataset:delete", setup=a_dataset)
def _(w: Walk, dataset: Dataset) -> Outcome:
    expected = event("dataset.remove", dataset)
    w.delete(dataset)
    return Outcome([expected])


@case(
    "datasets.dataset:action:delete_selected",
    setup=lambda w: [a_dataset(w), a_dataset(w, "coco")],
)
def _(w: Walk, datasets: list[Dataset]) -> Outcome:
    expected = [event("dataset.remove", d) for d in datasets]
    w.action("delete_selected", datasets)
    return Outcome(expected)


# catalog.cluster


def a_cluster(w: Walk) -> Cluster:
    return Cluster.objects.create(name="spoke", kubeconfig_path="/etc/kube/spoke", role="spoke")


@case("catalog.cluster:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(Cluster, "add").set(
        name="burst", connection="kubeconfig", kubeconfig_path="/etc/kube/burst", role="burst"
    ).submit()
    cluster = Cluster.objects.get(name="burst")
    return Outcome([event("cluster.create", cluster)], [(CLUSTER_SETUP, (cluster.pk,))])


@case("catalog.cluster:change", setup=a_cluster)
def _(w: Walk, cluster: Cluster) -> Outcome:
    w.form(cluster).set(kubeconfig_context="spoke-admin").submit()
    return Outcome([event("cluster.update", cluster)], [(CLUSTER_SETUP, (cluster.pk,))])


@case("catalog.cluster:delete", setup=a_cluster)
def _(w: Walk, cluster: Cluster) -> Outcome:
    expected = event("cluster.delete", cluster)
    w.delete(cluster)
    return Outcome([expected])


@case("catalog.cluster:action:delete_selected", setup=a_cluster)
def _(w: Walk, cluster: Cluster) -> Outcome:
    expected = event("cluster.delete", cluster)
    w.action("delete_selected", [cluster])
    return Outcome([expected])


# catalog.nodemaintenance


def a_node(w: Walk) -> ClusterNode:
    return ClusterNode.objects.create(cluster=a_cluster(w), name="gpu-7", gpu_count=8)


def a_window(w: Walk) -> NodeMaintenance:
    start = timezone.now() + timedelta(days=1)
    return NodeMaintenance.objects.create(
        node=a_node(w), starts_at=start, ends_at=start + timedelta(hours=4), reason="BIOS"
    )


@case("catalog.nodemaintenance:add", setup=a_node)
def _(w: Walk, node: ClusterNode) -> Outcome:
    w.form(NodeMaintenance, "add").set(
        node=node.pk,
        starts_at_0="2030-01-02",
        starts_at_1="08:00:00",
        ends_at_0="2030-01-02",
        ends_at_1="12:00:00",
        drain=True,
        reason="Firmware update",
    ).submit()
    window = NodeMaintenance.objects.get(node=node)
    assert window.created_by is not None
    return Outcome([event("node_maintenance.create", window)])


@case("catalog.nodemaintenance:change", setup=a_window)
def _(w: Walk, window: NodeMaintenance) -> Outcome:
    w.form(window).set(reason="BIOS and firmware").submit()
    return Outcome([event("node_maintenance.update", window)])


@case("catalog.nodemaintenance:delete", setup=a_window)
def _(w: Walk, window: NodeMaintenance) -> Outcome:
    expected = event("node_maintenance.delete", window)
    w.delete(window)
    return Outcome([expected])


@case("catalog.nodemaintenance:action:delete_selected", setup=a_window)
def _(w: Walk, window: NodeMaintenance) -> Outcome:
    expected = event("node_maintenance.delete", window)
    w.action("delete_selected", [window])
    return Outcome([expected])


# quotas.teamquota


@case("quotas.teamquota:add", hard=10)
def _(w: Walk, _: Any) -> Outcome:
    w.form(TeamQuota, "add").set(
        team=w.team.pk, gpu_class=w.a100.pk, guaranteed_milli=1000, limit_milli=2000
    ).submit()
    return Outcome([event("quota.create", w.quota(w.a100))], w.ensure())


@case("quotas.teamquota:change", hard=12)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    w.form(quota).set(limit_milli=12000).submit()
    assert w.quota(w.h100).limit_milli == 12000
    return Outcome([event("quota.update", quota)], w.ensure())


@case("quotas.teamquota:delete", setup=with_a100_quota, hard=2)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    expected = event("quota.delete", quota)
    w.delete(quota)
    return Outcome([expected], w.ensure())


@case("quotas.teamquota:action:delete_selected", setup=with_a100_quota, hard=2)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    expected = event("quota.delete", quota)
    w.action("delete_selected", [quota])
    return Outcome([expected], w.ensure())


# accounts.team


@case("accounts.team:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(Team, "add").set(name="Speech", idp_group="gpupaas-speech").submit()
    team = Team.objects.get(name="Speech")
    assert team.namespace == "team-speech"
    return Outcome([event("team.create", team)], [(ENSURE, (team.pk,))])


@case("accounts.team:change")
def _(w: Walk, _: Any) -> Outcome:
    team = w.cast.team
    w.form(team).set(idp_lead_group="gpupaas-vision-leads").submit()
    return Outcome([event("team.update", team)])


@case("accounts.team:delete", setup=lambda w: TeamFactory(name="Audio"))
def _(w: Walk, team: Team) -> Outcome:
    expected = event("team.delete", team)
    w.delete(team)
    return Outcome([expected])


@case(
    "accounts.team:action:delete_selected",
    setup=lambda w: [TeamFactory(name="Audio"), TeamFactory(name="Robotics")],
)
def _(w: Walk, teams: list[Team]) -> Outcome:
    expected = [event("team.delete", t) for t in teams]
    w.action("delete_selected", teams)
    return Outcome(expected)


@case("accounts.team:inline:accounts.membership:add")
def _(w: Walk, _: Any) -> Outcome:
    team, outsider = w.cast.team, w.cast.outsider
    w.form(team).add_row("memberships", user=outsider.pk, role="member").submit()
    membership = Membership.objects.get(team=team, user=outsider)
    assert membership.source == Membership.Source.MANUAL
    return Outcome([event("membership.add", membership)])


@case("accounts.team:inline:accounts.membership:change")
def _(w: Walk, _: Any) -> Outcome:
    membership = Membership.objects.get(team=w.cast.team, user=w.cast.owner)
    w.form(w.cast.team).change_row("memberships", membership, role="lead").submit()
    assert Membership.objects.get(pk=membership.pk).role == "lead"
    return Outcome([event("membership.update", membership)])


@case("accounts.team:inline:accounts.membership:delete")
def _(w: Walk, _: Any) -> Outcome:
    membership = Membership.objects.get(team=w.cast.team, user=w.cast.teammate)
    expected = event("membership.remove", membership)
    w.form(w.cast.team).delete_row("memberships", membership).submit()
    return Outcome([expected])


@case("accounts.team:inline:quotas.teamquota:add", hard=10)
def _(w: Walk, _: Any) -> Outcome:
    w.form(w.team).add_row(
        "quotas", gpu_class=w.a100.pk, guaranteed_milli=1000, limit_milli=2000
    ).submit()
    return Outcome([event("quota.create", w.quota(w.a100))], w.ensure())


@case("accounts.team:inline:quotas.teamquota:change", hard=12)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    w.form(w.team).change_row("quotas", quota, limit_milli=12000).submit()
    assert w.quota(w.h100).limit_milli == 12000
    return Outcome([event("quota.update", quota)], w.ensure())


@case("accounts.team:inline:quotas.teamquota:delete", setup=with_a100_quota, hard=2)
def _(w: Walk, _: Any) -> Outcome:
    quota = w.quota(w.h100)
    expected = event("quota.delete", quota)
    w.form(w.team).delete_row("quotas", quota).submit()
    return Outcome([expected], w.ensure())


# accounts.membership


@case("accounts.membership:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(Membership, "add").set(
        user=w.cast.outsider.pk, team=w.cast.team.pk, role="lead"
    ).submit()
    membership = Membership.objects.get(team=w.cast.team, user=w.cast.outsider)
    return Outcome([event("membership.add", membership)])


@case("accounts.membership:change")
def _(w: Walk, _: Any) -> Outcome:
    membership = Membership.objects.get(team=w.cast.team, user=w.cast.owner)
    w.form(membership).set(role="lead").submit()
    return Outcome([event("membership.update", membership)])


@case("accounts.membership:delete")
def _(w: Walk, _: Any) -> Outcome:
    membership = Membership.objects.get(team=w.cast.team, user=w.cast.teammate)
    expected = event("membership.remove", membership)
    w.delete(membership)
    return Outcome([expected])


@case("accounts.membership:action:delete_selected")
def _(w: Walk, _: Any) -> Outcome:
    memberships = list(Membership.objects.filter(team=w.cast.team, role="member"))
    expected = [event("membership.remove", m) for m in memberships]
    w.action("delete_selected", memberships)
    return Outcome(expected)


# accounts.user


@case("accounts.user:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(User, "add").set(
        username="newcomer", password1="a-Long-enough-pass-42", password2="a-Long-enough-pass-42"
    ).submit()
    user = User.objects.get(username="newcomer")
    assert user.check_password("a-Long-enough-pass-42")
    return Outcome([event("user.create", user)])


@case("accounts.user:change")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    w.form(owner).set(display_name="Olivia Owner").submit()
    return Outcome([event("user.update", owner)])


@case("accounts.user:change", variant="staff")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    w.form(owner).set(is_staff=True).submit()
    assert User.objects.get(pk=owner.pk).is_staff
    details = AuditEvent.objects.get(action="user.access", object_id=str(owner.pk)).details
    assert details["changed"] == {"is_staff": {"before": False, "after": True}}
    return Outcome([event("user.access", owner)])


@case("accounts.user:change", variant="groups", setup=lambda w: Group.objects.create(name="ops"))
def _(w: Walk, group: Group) -> Outcome:
    owner = w.cast.owner
    w.form(owner).set(groups=[group.pk]).submit()
    assert list(User.objects.get(pk=owner.pk).groups.all()) == [group]
    return Outcome([event("user.access", owner)])


@case("accounts.user:password")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    AdminForm.open(w.client, reverse("admin:auth_user_password_change", args=[owner.pk])).set(
        password1="another-Long-pass-43", password2="another-Long-pass-43"
    ).submit()
    assert User.objects.get(pk=owner.pk).check_password("another-Long-pass-43")
    details = AuditEvent.objects.get(action="user.password").details
    assert details == {"password_usable": True}
    return Outcome([event("user.password", owner)])


@case("accounts.user:delete", setup=lambda w: UserFactory(username="leaver"))
def _(w: Walk, user: User) -> Outcome:
    expected = event("user.delete", user)
    w.delete(user)
    return Outcome([expected])


@case(
    "accounts.user:action:delete_selected",
    setup=lambda w: [UserFactory(username="leaver"), UserFactory(username="another-leaver")],
)
def _(w: Walk, users: list[User]) -> Outcome:
    expected = [event("user.delete", u) for u in users]
    w.action("delete_selected", users)
    return Outcome(expected)


@case(
    "accounts.user:inline:accounts.oidcidentity:delete",
    setup=lambda w: OidcIdentity.objects.create(
        user=w.cast.owner, issuer="https://idp.example.com", subject="owner-1"
    ),
)
def _(w: Walk, identity: OidcIdentity) -> Outcome:
    expected = event("oidcidentity.delete", identity)
    w.form(w.cast.owner).delete_row("oidc_identities", identity).submit()
    assert not OidcIdentity.objects.filter(pk=identity.pk).exists()
    return Outcome([expected])


@case("accounts.user:inline:accounts.membership:add")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    w.form(owner).add_row("memberships", team=w.cast.other_team.pk, role="member").submit()
    membership = Membership.objects.get(team=w.cast.other_team, user=owner)
    return Outcome([event("membership.add", membership)])


@case("accounts.user:inline:accounts.membership:change")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    membership = Membership.objects.get(team=w.cast.team, user=owner)
    w.form(owner).change_row("memberships", membership, role="lead").submit()
    return Outcome([event("membership.update", membership)])


@case("accounts.user:inline:accounts.membership:delete")
def _(w: Walk, _: Any) -> Outcome:
    owner = w.cast.owner
    membership = Membership.objects.get(team=w.cast.team, user=owner)
    expected = event("membership.remove", membership)
    w.form(owner).delete_row("memberships", membership).submit()
    return Outcome([expected])


# accounts.apitoken


@case(
    "accounts.apitoken:action:revoke",
    setup=lambda w: api_token_create(
        actor=w.cast.owner, name="ci", scopes=[accounts_core.SCOPE_READ], expires_at=None
    )[0],
)
def _(w: Walk, token: ApiToken) -> Outcome:
    w.action("revoke", [token])
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
    return Outcome([event("token.revoke", token)])


# auth.group


def a_group(w: Walk) -> Group:
    return Group.objects.create(name="ops")


@case("auth.group:add")
def _(w: Walk, _: Any) -> Outcome:
    view_team = Permission.objects.get(codename="view_team")
    w.form(Group, "add").set(name="auditors", permissions=[view_team.pk]).submit()
    group = Group.objects.get(name="auditors")
    assert list(group.permissions.all()) == [view_team]
    return Outcome([event("group.create", group)])


@case("auth.group:change", setup=a_group)
def _(w: Walk, group: Group) -> Outcome:
    view_team = Permission.objects.get(codename="view_team")
    w.form(group).set(permissions=[view_team.pk]).submit()
    return Outcome([event("group.update", group)])


@case("auth.group:delete", setup=a_group)
def _(w: Walk, group: Group) -> Outcome:
    expected = event("group.delete", group)
    w.delete(group)
    return Outcome([expected])


@case("auth.group:action:delete_selected", setup=a_group)
def _(w: Walk, group: Group) -> Outcome:
    expected = event("group.delete", group)
    w.action("delete_selected", [group])
    return Outcome([expected])


# telemetry.idlepolicy


def a_policy(w: Walk) -> IdlePolicy:
    return IdlePolicy.objects.create(team=w.cast.team)


@case("telemetry.idlepolicy:add")
def _(w: Walk, _: Any) -> Outcome:
    w.form(IdlePolicy, "add").set(team=w.cast.team.pk, gpu_class="", threshold_percent=10).submit()
    return Outcome([event("idlepolicy.create", IdlePolicy.objects.get(team=w.cast.team))])


@case("telemetry.idlepolicy:change", setup=a_policy)
def _(w: Walk, policy: IdlePolicy) -> Outcome:
    w.form(policy).set(suspend_after="01:00:00").submit()
    details = AuditEvent.objects.get(action="idlepolicy.update").details
    assert details["changed"] == {"suspend_after": {"before": 1800.0, "after": 3600.0}}
    return Outcome([event("idlepolicy.update", policy)])


@case("telemetry.idlepolicy:delete", setup=a_policy)
def _(w: Walk, policy: IdlePolicy) -> Outcome:
    expected = event("idlepolicy.delete", policy)
    w.delete(policy)
    return Outcome([expected])


@case("telemetry.idlepolicy:action:delete_selected", setup=a_policy)
def _(w: Walk, policy: IdlePolicy) -> Outcome:
    expected = event("idlepolicy.delete", policy)
    w.action("delete_selected", [policy])
    return Outcome([expected])


# workloads.workload


@case(
    "workloads.workload:action:cancel",
    setup=lambda w: WorkloadFactory(
        owner=w.cast.owner,
        team=w.cast.team,
        gpu_class=w.h100,
        image=w.cast.image,
        state=wl.RUNNING,
    ),
)
def _(w: Walk, workload: Any) -> Outcome:
    w.action("cancel", [workload])
    return Outcome([event("workload.cancel", workload)])


# --- the tests ------------------------------------------------------------------------------


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """Tasks sent once their transaction commits (by name, with their arguments)."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(TaskRef, "send", lambda ref, *args, **kwargs: sent.append((ref.name, args)))
    return sent


def staff_client(cast: Cast) -> Client:
    client = Client()
    client.force_login(cast.admin)
    return client


def walk_one(key: str, w: Walk, capture: Any, queued: list[tuple[str, tuple[Any, ...]]]) -> Outcome:
    """Run one path: its setup, then its requests; return what it expects, with the events
    and tasks it left checked."""
    walked = CASES[key]
    state = walked.setup(w)
    last = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
    queued.clear()
    with capture(execute=True):
        outcome = walked.run(w, state)
    new = list(AuditEvent.objects.filter(id__gt=last).order_by("id"))
    assert {Event(e.action, e.object_type, e.object_id) for e in new} == set(outcome.events)
    assert len(new) == len(outcome.events), [e.action for e in new]
    for e in new:
        assert (e.actor_id, e.actor_repr, e.source_ip) == (w.cast.admin.pk, "admin", CLIENT_IP)
    for task in outcome.queued:
        assert task in queued, f"{task} not queued; queued: {queued}"
    return outcome


@pytest.mark.parametrize("key", sorted(CASES))
def test_admin_write_goes_through_a_service(
    key: str,
    cast: Cast,
    django_capture_on_commit_callbacks: Any,
    queued: list[tuple[str, tuple[Any, ...]]],
) -> None:
    walk_one(
        key, Walk(staff_client(cast), cast, cast.team), django_capture_on_commit_callbacks, queued
    )


def admin_write_paths() -> set[str]:
    """Every way the registered admins can write, as the walk names them."""
    request = RequestFactory().get("/admin/")
    request.user = User(username="root", is_staff=True, is_superuser=True, is_active=True)
    paths: set[str] = set()
    for model, model_admin in admin.site._registry.items():
        label = model._meta.label_lower
        can_add = model_admin.has_add_permission(request)
        can_change = model_admin.has_change_permission(request)
        if can_add:
            paths.add(f"{label}:add")
        if can_change:
            paths.add(f"{label}:change")
            if getattr(model_admin, "change_password_form", None) is not None:
                paths.add(f"{label}:password")
        if model_admin.has_delete_permission(request):
            paths.add(f"{label}:delete")
        paths |= {f"{label}:action:{name}" for name in model_admin.get_actions(request)}
        if not (can_add or can_change):
            continue
        for inline in model_admin.get_inline_instances(request):
            where = f"{label}:inline:{inline.model._meta.label_lower}"
            fields = flatten_fieldsets(inline.get_fieldsets(request))
            parent_key = inline.get_formset(request).fk.name  # set by the formset, not edited
            editable = set(fields) - set(inline.get_readonly_fields(request)) - {parent_key}
            if editable and inline.has_add_permission(request, None):
                paths.add(f"{where}:add")
            if editable and inline.has_change_permission(request, None):
                paths.add(f"{where}:change")
            if inline.can_delete and inline.has_delete_permission(request, None):
                paths.add(f"{where}:delete")
    return paths


def test_every_admin_write_path_is_walked() -> None:
    walked = {c.path for c in CASES.values()}
    required = admin_write_paths()
    assert required - walked == set(), "admin write paths nobody walks"
    assert walked - required == set(), "walked paths the admin no longer offers"


def a_workload(cast: Cast) -> Any:
    return WorkloadFactory(
        owner=cast.owner, team=cast.team, gpu_class=cast.gpu_class, image=cast.image
    )


READ_ONLY: dict[str, Callable[[Cast], models.Model]] = {
    "workloads.workload": a_workload,
    "accounts.apitoken": lambda cast: api_token_create(
        actor=cast.owner, name="ci", scopes=[accounts_core.SCOPE_READ], expires_at=None
    )[0],
    "catalog.clusternode": lambda cast: ClusterNode.objects.create(
        cluster=Cluster.objects.create(name="hub", kubeconfig_path="/etc/kube/hub"), name="gpu-0"
    ),
    "telemetry.usageday": lambda cast: UsageDay.objects.create(
        day=date(2026, 1, 1),
        workload=a_workload(cast),
        team=cast.team,
        owner=cast.owner,
        gpu_class=cast.gpu_class,
    ),
}


@pytest.mark.parametrize(
    ("model", "view"),
    [
        ("workloads.workload", "change"),
        ("workloads.workload", "delete"),
        ("accounts.apitoken", "change"),
        ("accounts.apitoken", "delete"),
        ("catalog.clusternode", "delete"),
        ("telemetry.usageday", "delete"),
    ],
)
def test_screens_left_out_of_the_walk_refuse_writes(cast: Cast, model: str, view: str) -> None:
    obj = READ_ONLY[model](cast)
    before = AuditEvent.objects.count()
    response = staff_client(cast).post(url(obj, view, obj.pk), {"post": "yes", "name": "x"})
    assert response.status_code == 403
    assert type(obj)._default_manager.filter(pk=obj.pk).exists()
    assert AuditEvent.objects.count() == before


# --- on the simulated cluster ---------------------------------------------------------------

QUOTA_CASES = sorted(k for k, c in CASES.items() if c.hard is not None)


@pytest.fixture
def sim_cluster(kubesim: Any) -> Cluster:
    from apps.orchestration.clusters import forget_clients

    forget_clients()
    return Cluster.objects.create(name="sim", kubeconfig_path=str(kubesim.kubeconfig))


@pytest.fixture
def sim_team(sim_cluster: Cluster, cast: Cast, kube_api_client: Any) -> Iterator[Team]:
    """A team of its own (its own namespace), with 4-8 H100 GPUs."""
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    team = TeamFactory()
    TeamQuotaFactory(team=team, gpu_class=cast.gpu_class, guaranteed_milli=4000, limit_milli=8000)
    yield team
    try:
        k8s.CoreV1Api(kube_api_client).delete_namespace(team.namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_every_quota_path_is_checked_on_the_cluster() -> None:
    quota_paths = {c.path for c in CASES.values() if "quotas.teamquota" in c.path}
    assert quota_paths == {CASES[k].path for k in QUOTA_CASES}


@pytest.mark.kubesim
@pytest.mark.parametrize("key", QUOTA_CASES)
def test_admin_quota_change_reaches_the_resource_quota(
    key: str,
    cast: Cast,
    sim_team: Team,
    kube_api_client: Any,
    django_capture_on_commit_callbacks: Any,
    queued: list[tuple[str, tuple[Any, ...]]],
) -> None:
    from kubernetes import client as k8s

    import apps.orchestration.tasks  # noqa: F401  (registers the tasks by name)
    from apps.orchestration import manifests, services
    from gpupaas.celery import app

    core_api = k8s.CoreV1Api(kube_api_client)

    def hard() -> dict[str, str]:
        quota = core_api.read_namespaced_resource_quota(manifests.QUOTA_NAME, sim_team.namespace)
        # GPU limits only: every team namespace also has its object counts.
        return {
            k: v
            for k, v in (quota.spec.hard or {}).items()
            if k.startswith("requests.") and k != "requests.storage"
        }

    w = Walk(staff_client(cast), cast, sim_team)
    walked = CASES[key]
    state = walked.setup(w)
    services.team_namespace_ensure(team=sim_team)  # the cluster as it stands before the change
    before = hard()
    assert before != walked.hard
    with django_capture_on_commit_callbacks(execute=True):
        walked.run(w, state)
    assert (ENSURE, (sim_team.pk,)) in queued
    # What the admin queued, run as a worker runs it.
    for name, args in queued:
        app.tasks[name].apply(args=list(args)).get()
    assert hard() == walked.hard
