"""Filters of the workload lists: a team's workloads and the searchable list of all one may see."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.db.models import Q

from apps.accounts.models import Membership, Team, User
from apps.catalog.models import GpuClass
from apps.workloads import core, rules
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    SORT_LABELS,
    WorkloadFilters,
    day_start,
)

STATE_FILTERS = {
    "active": ("Active", core.ACTIVE_STATES),
    "waiting": ("Waiting", core.WAITING_STATES | {core.PREEMPTED}),
    "suspended": ("Suspended", frozenset({core.SUSPENDED})),
    "finished": ("Finished", core.TERMINAL_STATES),
}


class TeamWorkloadFilterForm(forms.Form):
    state = forms.ChoiceField(
        required=False,
        choices=[("", "Any state"), *((k, v[0]) for k, v in STATE_FILTERS.items())],
    )
    kind = forms.ChoiceField(
        required=False,
        # Only kinds a person can request (the request rules' list): no filter for a kind no
        # workload can have.
        choices=[
            ("", "Any kind"),
            *((k, label) for k, label in Workload.Kind.choices if k in rules.SUBMITTABLE_KINDS),
        ],
    )
    owner = forms.ModelChoiceField(
        queryset=User.objects.none(), required=False, empty_label="Anyone"
    )
    gpu_class = forms.ModelChoiceField(
        queryset=GpuClass.objects.none(), required=False, empty_label="Any class", label="GPU class"
    )

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Members and anyone who ran work for the team, each once: semi-joins, so the choices
        # cost the team's distinct owners, not a join row per workload.
        owners = User.objects.filter(
            Q(pk__in=Membership.objects.filter(team=team).values("user_id"))
            | Q(pk__in=Workload.objects.filter(team=team).values("owner_id"))
        )
        self.fields["owner"].queryset = owners.order_by(  # type: ignore[attr-defined]
            "username"
        )
        self.fields["gpu_class"].queryset = GpuClass.objects.order_by(  # type: ignore[attr-defined]
            "name"
        )

    def filters(self) -> dict[str, Any]:
        """Selector filters for the valid choices (invalid ones are ignored)."""
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        result: dict[str, Any] = {}
        if data.get("state"):
            result["states"] = STATE_FILTERS[data["state"]][1]
        if data.get("kind"):
            result["kind"] = data["kind"]
        if data.get("owner"):
            result["owner"] = data["owner"]
        if data.get("gpu_class"):
            result["gpu_class"] = data["gpu_class"]
        return result


class WorkloadListForm(forms.Form):
    """The workloads list's search and filters (GET); invalid values are form errors."""

    q = forms.CharField(
        label="Search", required=False, max_length=100, help_text="Name, image or command."
    )
    kind = forms.ChoiceField(required=False, choices=[("", "Any kind"), *Workload.Kind.choices])
    state = forms.ChoiceField(
        required=False,
        choices=[("", "Any state"), *((k, v[0]) for k, v in STATE_FILTERS.items())],
    )
    gpu_class = forms.ChoiceField(required=False, label="GPU class", choices=[])
    team = forms.ChoiceField(required=False, choices=[])
    owner = forms.CharField(
        required=False, max_length=150, help_text="A user name, or “me”.", label="Owner"
    )
    created_from = forms.DateField(
        required=False, label="Created from", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_to = forms.DateField(
        required=False, label="Created to", widget=forms.DateInput(attrs={"type": "date"})
    )
    sort = forms.ChoiceField(required=False, choices=list(SORT_LABELS.items()))

    def __init__(self, *args: Any, teams: Iterable[Team], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team_field: forms.ChoiceField = self.fields["team"]  # type: ignore[assignment]
        team_field.choices = [("", "Any team"), *((t.slug, t.name) for t in teams)]
        class_field: forms.ChoiceField = self.fields["gpu_class"]  # type: ignore[assignment]
        class_field.choices = [
            ("", "Any class"),
            *((n, n) for n in GpuClass.objects.order_by("name").values_list("name", flat=True)),
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("created_from"), data.get("created_to")
        if start and end and start > end:
            self.add_error("created_to", "The last day comes before the first.")
        return data

    def filters(self) -> WorkloadFilters:
        """The selector's filters (call after is_valid)."""
        data = self.cleaned_data
        return WorkloadFilters(
            states=tuple(STATE_FILTERS[data["state"]][1]) if data.get("state") else (),
            kinds=(data["kind"],) if data.get("kind") else (),
            team=data.get("team") or None,
            owner=(data.get("owner") or "").strip() or None,
            gpu_class=data.get("gpu_class") or None,
            search=(data.get("q") or "").strip() or None,
            created_from=day_start(data.get("created_from")),
            created_before=day_start(data.get("created_to"), days_after=1),
            sort=data.get("sort") or "-created",
        )
