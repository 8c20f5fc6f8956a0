"""Forms of the platform overview: a team's quota in GPUs (the service keeps milli-GPU)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django import forms

from apps.accounts.models import Team
from apps.catalog.models import GpuClass
from apps.common.parsing import parse_month

MAX_GPUS = Decimal(100_000)


def gpus_field(label: str, *, required: bool = True, help_text: str = "") -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=required,
        min_value=Decimal(0),
        max_value=MAX_GPUS,
        max_digits=9,
        decimal_places=3,
        help_text=help_text,
    )


def milli_of(value: Decimal | None) -> int | None:
    """GPUs as milli-GPU (the field allows at most three decimals, so this is exact)."""
    return None if value is None else int(value * 1000)


class QuotaForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.order_by("name"), to_field_name="slug")
    gpu_class = forms.ModelChoiceField(
        label="GPU class", queryset=GpuClass.objects.order_by("name"), to_field_name="name"
    )
    guaranteed = gpus_field("Guaranteed (GPUs)", help_text="Never taken away, e.g. 4 or 0.5.")
    limit = gpus_field("Limit (GPUs)", help_text="Burst cap: at least the guarantee.")
    per_user_cap = gpus_field(
        "Per-user cap (GPUs)", required=False, help_text="Empty: none (within the limit)."
    )

    def values(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "team": data["team"],
            "gpu_class": data["gpu_class"],
            "guaranteed_milli": milli_of(data["guaranteed"]),
            "limit_milli": milli_of(data["limit"]),
            "per_user_cap_milli": milli_of(data.get("per_user_cap")),
        }


class BudgetForm(forms.Form):
    month = forms.CharField(
        max_length=7, help_text="YYYY-MM: the budget holds from this month on until changed."
    )
    amount = forms.DecimalField(
        min_value=Decimal(0), max_value=Decimal("999999999999.99"), max_digits=14, decimal_places=2
    )
    thresholds = forms.CharField(
        max_length=100,
        initial="50, 80, 100",
        help_text="Percent of the budget at which the leads and admins are told, e.g. 50, 80, 100.",
    )
    hard_stop = forms.BooleanField(
        required=False,
        label="Hard stop",
        help_text="Once spent, admit new work only in the batch class or with a lead's approval.",
    )

    def clean_month(self) -> date:
        try:
            return parse_month(self.cleaned_data["month"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_thresholds(self) -> list[int]:
        words = [w for w in self.cleaned_data["thresholds"].replace(",", " ").split() if w]
        values = []
        for word in words:
            if not word.isdigit() or len(word) > 4:
                raise forms.ValidationError(
                    "Thresholds are whole percentages separated by commas, e.g. 50, 80, 100."
                )
            values.append(int(word))
        return values


class AdviceForm(forms.Form):
    days = forms.IntegerField(required=False, min_value=1, max_value=90)


class AdviceApplyForm(AdviceForm):
    team = forms.SlugField(max_length=100)
    gpu_class = forms.CharField(max_length=100)
