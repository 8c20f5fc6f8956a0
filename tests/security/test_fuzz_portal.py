"""Fuzz pass of every portal form (hypothesis): the three request forms (submit and save as
template), the API token form, the team page's filters, the usage filters (chargeback), the
overview's quota form, the budget and policy forms, right-sizing advice and its apply, the
sizing helper, the request form's GET parameters, the quota request and decision forms, and
the reservation form and calendar, with valid choices mixed with junk
(Unicode digits, months outside the calendar, huge numbers, NUL, long text, missing fields).
No answer may be a 5xx; requests and 5xx are counted in the terminal summary
(tests/plugins/fuzz.py). Bounded: a few hundred requests, derandomized, in CI on every
change."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django import forms
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.accounts.models import User
from apps.accounts.selectors import teams_visible_to
from apps.catalog.selectors import gpu_classes_offered
from apps.quotas.models import QuotaRequest
from apps.web.forms.accounts import ApiTokenForm
from apps.web.forms.capacity import CalendarForm, DecisionForm, QuotaRequestForm, ReservationForm
from apps.web.forms.governance import BudgetForm, PolicyForm, QuotaForm
from apps.web.forms.notifications import NotificationPreferenceForm
from apps.web.forms.workloads import (
    REQUEST_FORMS,
    SizingForm,
    TeamWorkloadFilterForm,
    TemplateSaveForm,
    WorkloadListForm,
)
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
            "post", f"/workloads/new/{kind}/", cast.owner, form_data(form, {"action": "submit"})
        )
        both = form_data(form, {"action": "save-template"})
        template = form_data(TemplateSaveForm(prefix="template"))
        targets[f"template-save-{kind}"] = Target(
            "post",
            f"/workloads/new/{kind}/",
            cast.owner,
            st.tuples(both, template).map(lambda pair: {**pair[0], **pair[1]}),
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
    targets["token"] = Target("post", "/accounts/tokens/", cast.owner, form_data(ApiTokenForm()))
    targets["team-filters"] = Target(
        "get",
        f"/teams/{team}/",
        cast.lead,
        form_data(TeamWorkloadFilterForm(team=cast.team)),
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
    )
    requests = QuotaRequestForm(teams=teams_visible_to(cast.owner), classes=gpu_classes_offered())
    targets["quota-request"] = Target("post", "/quota-requests/", cast.owner, form_data(requests))
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
        "post", f"/quota-requests/{pending.pk}/", cast.admin, form_data(DecisionForm())
    )
    booking = ReservationForm(teams=teams_visible_to(cast.lead), classes=gpu_classes_offered())
    targets["reservation"] = Target("post", "/reservations/", cast.lead, form_data(booking))
    targets["calendar"] = Target(
        "get",
        "/reservations/",
        cast.lead,
        form_data(CalendarForm(classes=gpu_classes_offered())),
    )
    targets["notification-preferences"] = Target(
        "post",
        "/notifications/preferences/",
        cast.owner,
        form_data(NotificationPreferenceForm()),
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
        "post", "/overview/quotas/", cast.admin, form_data(QuotaForm())
    )
    targets["team-budget"] = Target(
        "post", f"/teams/{team}/budget/set/", cast.admin, form_data(BudgetForm())
    )
    targets["team-policy"] = Target(
        "post", f"/teams/{team}/policy/set/", cast.admin, form_data(PolicyForm())
    )
    targets["advice"] = Target(
        "get", "/overview/advice/", cast.admin, st.fixed_dictionaries({}, optional={"days": JUNK})
    )
    targets["advice-apply"] = Target(
        "post",
        "/overview/advice/apply/",
        cast.admin,
        st.fixed_dictionaries(
            {},
            optional={
                "team": st.one_of(st.just(team), JUNK),
                "gpu_class": st.one_of(st.just(cast.gpu_class.name), JUNK),
                "days": JUNK,
            },
        ),
    )
    return targets


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
]


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
