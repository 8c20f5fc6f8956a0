"""Forms of the quota request and reservation pages."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.quotas import core as quota_core

LOCAL = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
TIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]


class GpusField(forms.CharField):
    """A number of GPUs such as 16 or 0.25, cleaned to milli-GPU."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 12)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> int:
        text = super().clean(value)
        milli = quota_core.parse_gpus(text or "")
        if milli is None:
            raise forms.ValidationError(
                "A positive number of GPUs with at most three decimals, e.g. 16 or 0.25."
            )
        return milli


class _TeamClassForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    gpu_class = forms.ModelChoiceField(
        label="GPU class", queryset=GpuClass.objects.none(), empty_label=None
    )

    def __init__(self, *args: Any, teams: Any, classes: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team_field = self.fields["team"]
        class_field = self.fields["gpu_class"]
        assert isinstance(team_field, forms.ModelChoiceField)
        assert isinstance(class_field, forms.ModelChoiceField)
        team_field.queryset = teams
        class_field.queryset = classes


class QuotaRequestForm(_TeamClassForm):
    kind = forms.ChoiceField(
        label="For",
        choices=[
            (quota_core.KIND_TEAM, "The team: more guarantee and limit (platform admins decide)"),
            (quota_core.KIND_USER, "Me: a higher per-user cap (the team's leads decide)"),
        ],
    )
    amount = GpusField(label="More GPUs", help_text="How many more, e.g. 16 or 0.5.")
    starts_at = forms.DateTimeField(label="From", widget=LOCAL, input_formats=TIME_FORMATS)
    ends_at = forms.DateTimeField(label="Until", widget=LOCAL, input_formats=TIME_FORMATS)
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=quota_core.JUSTIFICATION_MAX,
        help_text="Why, and what happens without it: whoever decides reads this.",
    )


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Told to whoever asked, and audited.",
    )


class ReservationForm(_TeamClassForm):
    count = forms.IntegerField(
        min_value=1,
        max_value=10_000,
        help_text="How many GPUs, or units of the size below.",
        error_messages={
            "min_value": "Reserve at least one unit.",
            "max_value": "At most 10,000 units in one reservation: book larger blocks instead.",
        },
    )
    size = GpusField(
        label="Size of one unit",
        initial="1",
        help_text="1 for whole GPUs; a fraction such as 0.25 for notebooks on a shared class.",
    )
    starts_at = forms.DateTimeField(label="From", widget=LOCAL, input_formats=TIME_FORMATS)
    ends_at = forms.DateTimeField(label="Until", widget=LOCAL, input_formats=TIME_FORMATS)
    note = forms.CharField(required=False, max_length=500, help_text="What it is for.")


class CalendarForm(forms.Form):
    gpu_class = forms.ModelChoiceField(
        label="GPU class", queryset=GpuClass.objects.none(), empty_label=None, required=False
    )
    day = forms.DateField(
        label="From",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
    )

    def clean_day(self) -> date | None:
        day: date | None = self.cleaned_data.get("day")
        if day is not None and not 2000 <= day.year <= 9000:
            raise forms.ValidationError("Pick a day between the years 2000 and 9000.")
        return day

    def __init__(self, *args: Any, classes: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["gpu_class"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = classes
