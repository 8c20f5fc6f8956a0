"""Fuzz pass of every portal form (hypothesis): the request forms of each kind (submit and
save as template), the API token form, the datasets and secrets forms, the team page's
filters, the usage filters (chargeback), the overview's quota form, the budget and policy
forms, right-sizing advice and its apply, the sizing helper, the request form's GET
parameters, the quota request and decision forms, the reservation form and calendar, and the
Django admin's governance forms (a GPU class's price, a team's quota), with valid choices
mixed with junk (Unicode digits, months outside the calendar, huge numbers, NUL, long text,
missing fields). No answer may be a 5xx; requests and 5xx are counted in the terminal summary
(tests/plugins/fuzz.py). test_every_portal_form_is_fuzzed fails when a form of apps.web.forms
has no target; every route, forms or not, is swept by tests/security/test_fuzz_routes.py.
Bounded: a few hundred requests, derandomized, in CI on every change."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django import forms
from django.contrib import admin
from django.db.models import Model
from django.test import Client, RequestFactory
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.accounts.models import User
from apps.accounts.selectors import teams_visible_to
from apps.catalog.models import GpuClass
from apps.catalog.selectors import gpu_classes_offered
from apps.quotas.models import QuotaRequest, TeamQuota
from apps.web import forms as web_forms
from apps.web.forms.accounts import ApiTokenForm
from apps.web.forms.capacity import CalendarForm, DecisionForm, QuotaRequestForm, ReservationForm
from apps.web.forms.credentials import SecretCreateForm, SecretValueForm
from apps.web.forms.datasets import DatasetRegisterForm
from apps.web.forms.governance import (
    AdviceApplyForm,
    AdviceForm,
    BudgetForm,
    PolicyForm,
    QuotaForm,
)
from apps.web.forms.notifications import NotificationPreferenceForm
from apps.web.forms.workloads import (
    REQUEST_FORMS,
    SizingForm,
    TeamWorkloadFilterForm,
    TemplateSaveForm,
    WorkloadListForm,
)
from apps.web.forms.workloads.base import WorkloadRequestForm
from apps.workloads import core
from tests.plugins import fuzz
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db

PASS = "portal forms (hypothesis)"
EXAMPLES = 20  # per POST form; GET filters get 12: ~250 requests, ~40 s on two cores

JUNK = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "²",
            "١٢",
            "٣٠٠٠",
            "1e309",
            "nan",
            "-inf",
            "-1",
            "0",
            "99999999999999999999999",
            "9999-12",
            "0000-01",
            "2025-13",
            "1.5",
            "\x00",
            "a" * 300,
            "<script>alert(1)</script>",
            "KEY=value\nOTHER",
            '{"a": 1}',
            "../../etc/passwd",
        ]
    ),
    st.integers(min_value=-(10**20), max_value=10**20).map(str),
    st.text(max_size=40),
)


def _choices(field: forms.Field) -> list[str]:
    values = [str(value) for value, _ in getattr(field, "choices", [])]
    return [v for v in values if v != ""]


def _value(field: forms.Field) -> st.SearchStrategy[Any]:
    if isinstance(field, forms.BooleanField):
        return st.sampled_from(["on", "", "false", "²"])
    choices = _choices(field)
    if isinstance(field, forms.MultipleChoiceField):
        return st.lists(st.one_of(st.sampled_from(choices), JUNK) if choices else JUNK, max_size=3)
    if choices:
        return st.one_of(st.sampled_from(choices), st.sampled_from(choices), JUNK)
    return JUNK


def form_data(form: forms.Form, extra: dict[str, Any] | None = None) -> st.SearchStrategy[dict]:
    """Every field of ``form`` (by its prefixed name), each present or not, valid or junk."""
    fields = {
        form.add_prefix(name): st.one_of(st.none(), _value(field))
        for name, field in form.fields.items()
    }
    fixed = {k: st.just(v) for k, v in (extra or {}).items()}
    return st.fixed_dictionaries({**fields, **fixed}).map(
        lambda d: {k: v for k, v in d.items() if v is not None}
    )


@dataclass
class Target:
    method: str
    path: str
    user: User
    data: st.SearchStrategy[dict]
    # The form classes whose fields this target sends (test_every_portal_form_is_fuzzed).
    forms: tuple[type[forms.BaseForm], ...] = ()


def _check(client: Client, target: Target, data: dict[str, Any]) -> None:
    if target.method == "post":
        response = client.post(target.path, data)
    else:
        response = client.get(target.path, data)
    fuzz.record(PASS, response.status_code)
    assert response.status_code < 500, (target.method, target.path, data)


def _targets(portal: Portal) -> dict[str, Target]:
    cast = portal.cast
    team = cast.team.slug
    targets: dict[str, Target] = {}
    for kind, form_class in REQUEST_FORMS.items():
        form = form_class(user=cast.owner)
        targets[f"request-{kind}"] = Target(
            "post",
            f"/workloads/new/{kind}/",
            cast.owner,
            form_data(form, {"action": "submit"}),
            (form_class,),
        )
        both = form_data(form, {"action": "save-template"})
        template = form_data(TemplateSaveForm(prefix="template"))
        targets[f"template-save-{kind}"] = Target(
            "post",
            f"/workloads/new/{kind}/",
            cast.owner,
            st.tuples(both, template).map(lambda pair: {**pair[0], **pair[1]}),
            (form_class, TemplateSaveForm),
        )
        targets[f"request-get-{kind}"] = Target(
            "get",
            f"/workloads/new/{kind}/",
            cast.owner,
            st.fixed_dictionaries(
                {}, optional={"template": JUNK, "gpu_class": JUNK, "gpu_milli": JUNK}
            ),
        )
        targets[f"gpu-fields-{kind}"] = Target(
            "get", f"/workloads/new/{kind}/gpu/", cast.owner, form_data(form)
        )
        targets[f"verdict-{kind}"] = Target(
            "post", f"/workloads/new/{kind}/verdict/", cast.owner, form_data(form)
        )
    targets["token"] = Target(
        "post", "/accounts/tokens/", cast.owner, form_data(ApiTokenForm()), (ApiTokenForm,)
    )
    targets["team-filters"] = Target(
        "get",
        f"/teams/{team}/",
        cast.lead,
        form_data(TeamWorkloadFilterForm(team=cast.team)),
        (TeamWorkloadFilterForm,),
    )
    targets["usage-chargeback"] = Target(
        "get",
        "/usage/chargeback/",
        cast.admin,
        st.fixed_dictionaries(
            {},
            optional={
                "month": JUNK,
                "team": st.one_of(st.just(team), JUNK),
                "format": st.sampled_from(["csv", "html", "²"]),
                "page": JUNK,
            },
        ),
    )
    targets["sizing"] = Target(
        "get",
        "/workloads/sizing/",
        cast.owner,
        form_data(
            SizingForm(),
            {"kind": core.KIND_TRAINING},
        ).flatmap(
            lambda d: st.fixed_dictionaries(
                {}, optional={"kind": JUNK, "inline": st.sampled_from(["1", "²"])}
            ).map(lambda extra: {**d, **extra})
        ),
        (SizingForm,),
    )
    requests = QuotaRequestForm(teams=teams_visible_to(cast.owner), classes=gpu_classes_offered())
    targets["quota-request"] = Target(
        "post", "/quota-requests/", cast.owner, form_data(requests), (QuotaRequestForm,)
    )
    pending = QuotaRequest.objects.create(
        team=cast.team,
        gpu_class=cast.gpu_class,
        requested_by=cast.owner,
        amount_milli=1000,
        starts_at=timezone.now(),
        ends_at=timezone.now() + timedelta(days=1),
        justification="fuzz",
    )
    targets["quota-decide"] = Target(
        "post",
        f"/quota-requests/{pending.pk}/",
        cast.admin,
        form_data(DecisionForm()),
        (DecisionForm,),
    )
    booking = ReservationForm(teams=teams_visible_to(cast.lead), classes=gpu_classes_offered())
    targets["reservation"] = Target(
        "post", "/reservations/", cast.lead, form_data(booking), (ReservationForm,)
    )
    targets["calendar"] = Target(
        "get",
        "/reservations/",
        cast.lead,
        form_data(CalendarForm(classes=gpu_classes_offered())),
        (CalendarForm,),
    )
    targets["notification-preferences"] = Target(
        "post",
        "/notifications/preferences/",
        cast.owner,
        form_data(NotificationPreferenceForm()),
        (NotificationPreferenceForm,),
    )
    targets["notices-read"] = Target(
        "post", "/notifications/read/", cast.owner, st.fixed_dictionaries({}, optional={"id": JUNK})
    )
    targets["workload-list"] = Target(
        "get",
        "/workloads/",
        cast.owner,
        form_data(WorkloadListForm(teams=[cast.team])).flatmap(
            lambda d: st.fixed_dictionaries({}, optional={"page": JUNK}).map(
                lambda extra: {**d, **extra}
            )
        ),
        (WorkloadListForm,),
    )
    targets["workload-bulk-cancel"] = Target(
        "post",
        "/workloads/cancel/",
        cast.owner,
        st.fixed_dictionaries({}, optional={"ids": st.lists(JUNK, max_size=3), "next": JUNK}),
    )
    targets["notices-page"] = Target(
        "get", "/notifications/", cast.owner, st.fixed_dictionaries({}, optional={"page": JUNK})
    )
    targets["overview-quota"] = Target(
        "post", "/overview/quotas/", cast.admin, form_data(QuotaForm()), (QuotaForm,)
    )
    targets["team-budget"] = Target(
        "post", f"/teams/{team}/budget/set/", cast.admin, form_data(BudgetForm()), (BudgetForm,)
    )
    targets["team-policy"] = Target(
        "post", f"/teams/{team}/policy/set/", cast.admin, form_data(PolicyForm()), (PolicyForm,)
    )
    targets["advice"] = Target(
        "get", "/overview/advice/", cast.admin, form_data(AdviceForm()), (AdviceForm,)
    )
    targets["advice-apply"] = Target(
        "post",
        "/overview/advice/apply/",
        cast.admin,
        form_data(AdviceApplyForm()).flatmap(
            lambda d: st.fixed_dictionaries(
                {},
                optional={
                    "team": st.one_of(st.just(team), JUNK),
                    "gpu_class": st.one_of(st.just(cast.gpu_class.name), JUNK),
                },
            ).map(lambda extra: {**d, **extra})
        ),
        (AdviceApplyForm,),
    )
    targets["datasets"] = Target(
        "post",
        f"/teams/{team}/datasets/",
        cast.lead,
        form_data(DatasetRegisterForm()),
        (DatasetRegisterForm,),
    )
    targets["secret-create"] = Target(
        "post",
        f"/teams/{team}/secrets/",
        cast.owner,
        form_data(SecretCreateForm()),
        (SecretCreateForm,),
    )
    targets["secret-rotate"] = Target(
        "post",
        f"/teams/{team}/secrets/rotate/",
        cast.owner,
        form_data(SecretValueForm(), {"name": "hf-token"}).flatmap(
            lambda d: st.fixed_dictionaries(
                {}, optional={"scope": st.sampled_from(["team", "personal", "²"])}
            ).map(lambda extra: {**d, **extra})
        ),
        (SecretValueForm,),
    )
    # Governance in the Django admin: prices (a GPU class's hourly cost, with its quotas inline)
    # and a team's quota of a class.
    gpu_class_form = _admin_form(GpuClass, cast.admin, cast.gpu_class)
    targets["admin-gpu-class-price"] = Target(
        "post",
        f"/admin/catalog/gpuclass/{cast.gpu_class.pk}/change/",
        cast.admin,
        form_data(gpu_class_form(instance=cast.gpu_class), INLINE_MANAGEMENT),
    )
    quota_form = _admin_form(TeamQuota, cast.admin, None)
    targets["admin-team-quota"] = Target(
        "post", "/admin/quotas/teamquota/add/", cast.admin, form_data(quota_form())
    )
    return targets


# The management form of the GPU class page's quota inline (no rows changed).
INLINE_MANAGEMENT = {
    "quotas-TOTAL_FORMS": "0",
    "quotas-INITIAL_FORMS": "0",
    "quotas-MIN_NUM_FORMS": "0",
    "quotas-MAX_NUM_FORMS": "1000",
}


def _admin_form(model: type[Model], user: User, obj: Model | None) -> type[forms.ModelForm]:
    """The form the Django admin shows ``user`` for ``model`` (its change form for ``obj``)."""
    request = RequestFactory().get("/admin/")
    request.user = user
    form: type[forms.ModelForm] = admin.site._registry[model].get_form(request, obj)
    return form


TARGETS = [
    *(
        f"{name}-{kind}"
        for name in ("request", "template-save", "request-get", "gpu-fields", "verdict")
        for kind in REQUEST_FORMS
    ),
    "token",
    "team-filters",
    "usage-chargeback",
    "sizing",
    "quota-request",
    "quota-decide",
    "reservation",
    "calendar",
    "notification-preferences",
    "notices-read",
    "notices-page",
    "overview-quota",
    "team-budget",
    "team-policy",
    "advice",
    "advice-apply",
    "workload-list",
    "workload-bulk-cancel",
    "datasets",
    "secret-create",
    "secret-rotate",
    "admin-gpu-class-price",
    "admin-team-quota",
]

# Form classes of the portal that no view fills in as such: bases of the forms above.
FORM_BASES = {WorkloadRequestForm}


def _portal_form_classes() -> set[type[forms.BaseForm]]:
    """Every public form class defined in apps.web.forms (each module, walked)."""
    found: set[type[forms.BaseForm]] = set()
    for info in pkgutil.walk_packages(web_forms.__path__, f"{web_forms.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, forms.BaseForm)
                and value.__module__ == module.__name__
                and not value.__name__.startswith("_")
            ):
                found.add(value)
    return found


def test_every_portal_form_is_fuzzed(portal: Portal) -> None:
    """A form added to the portal without a fuzz target fails here."""
    targets = _targets(portal)
    assert sorted(targets) == sorted(TARGETS)
    covered = {form for target in targets.values() for form in target.forms}
    missing = _portal_form_classes() - covered - FORM_BASES
    assert not missing, sorted(f"{f.__module__}.{f.__name__}" for f in missing)


@pytest.mark.parametrize("name", TARGETS)
def test_portal_form_never_answers_5xx(portal: Portal, name: str) -> None:
    target = _targets(portal)[name]
    client = Client(raise_request_exception=False)  # a crash is counted as the 500 it is
    client.force_login(target.user)

    @settings(
        max_examples=EXAMPLES if target.method == "post" else 12,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(data=target.data)
    def run(data: dict[str, Any]) -> None:
        _check(client, target, data)

    run()
