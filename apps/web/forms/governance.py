"""Forms of the platform overview: a team's quota in GPUs (the service keeps milli-GPU)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django import forms

from apps.accounts.models import Team
from apps.catalog.models import GpuClass, Image
from apps.common.parsing import parse_month

MAX_GPUS = Decimal(100_000)


def bounds_messages(*, low: str, high: str, places: str = "") -> dict[str, str]:
    """A number field's own words for a value out of its bounds, instead of Django's
    "Ensure this value is less than or equal to …"."""
    messages = {"min_value": low, "max_value": high, "max_whole_digits": high}
    messages["max_digits"] = high
    if places:
        messages["max_decimal_places"] = places
    return messages


GPUS_MESSAGES = bounds_messages(
    low="A number of GPUs cannot be negative.",
    high=f"At most {MAX_GPUS:,} GPUs: no cluster holds more.",
    places="GPUs with at most three decimal places (0.001 GPU is the smallest share), e.g. 0.25.",
)


def gpus_field(label: str, *, required: bool = True, help_text: str = "") -> forms.DecimalField:
    return forms.DecimalField(
        label=label,
        required=required,
        min_value=Decimal(0),
        max_value=MAX_GPUS,
        max_digits=9,
        decimal_places=3,
        help_text=help_text,
        error_messages=GPUS_MESSAGES,
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
        min_value=Decimal(0),
        max_value=Decimal("999999999999.99"),
        max_digits=14,
        decimal_places=2,
        error_messages=bounds_messages(
            low="A budget cannot be negative: 0 stops all but batch work under a hard stop.",
            high="A budget of at most 999,999,999,999.99 a month.",
            places="A budget in the currency's units and cents: at most two decimal places.",
        ),
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
            if not (word.isascii() and word.isdigit()) or len(word) > 4:  # int("²") raises
                raise forms.ValidationError(
                    "Thresholds are whole percentages separated by commas, e.g. 50, 80, 100."
                )
            values.append(int(word))
        return values


class AdviceForm(forms.Form):
    days = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=90,
        error_messages=bounds_messages(
            low="Look back at least 1 day.", high="Look back at most 90 days."
        ),
    )


class AdviceApplyForm(AdviceForm):
    team = forms.SlugField(max_length=100)
    gpu_class = forms.CharField(max_length=100)


KIND_NAMES = {"notebook": "notebooks", "training": "training jobs", "sweep": "sweeps"}


class PolicyForm(forms.Form):
    """A team's policy as an admin types it: GPUs, hours and minutes."""

    allowed_classes = forms.ModelMultipleChoiceField(
        queryset=GpuClass.objects.order_by("name"),
        to_field_name="name",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Allowed GPU classes",
        help_text="None ticked: every class the team has a quota of.",
    )
    allowed_images = forms.ModelMultipleChoiceField(
        queryset=Image.objects.order_by("name"),
        to_field_name="name",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Allowed images",
        help_text="None ticked: every offered image.",
    )
    max_gpus = gpus_field(
        "Maximum GPUs per workload",
        required=False,
        help_text="What one workload holds at once (a sweep: its trials at once). Empty: no cap.",
    )
    exclusive_classes = forms.ModelMultipleChoiceField(
        queryset=GpuClass.objects.order_by("name"),
        to_field_name="name",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="No GPU shared with other teams on",
        help_text="Time-slicing and vGPU isolate no tenant from another: fractions of these "
        "classes are refused for the team.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for kind, label in KIND_NAMES.items():
            self.fields[f"max_runtime_{kind}_hours"] = forms.DecimalField(
                label=f"Maximum runtime of {label} (hours)",
                required=False,
                min_value=Decimal("0.02"),
                max_value=Decimal(720),
                max_digits=6,
                decimal_places=2,
                error_messages=bounds_messages(
                    low=f"A maximum runtime of {label} of at least 0.02 hours (72 seconds).",
                    high=f"A maximum runtime of {label} of at most 720 hours (30 days).",
                    places="Hours with at most two decimal places, e.g. 1.5.",
                ),
            )
            self.fields[f"idle_timeout_{kind}_minutes"] = forms.IntegerField(
                label=f"Default idle timeout of {label} (minutes)",
                required=False,
                min_value=5,
                max_value=30 * 24 * 60,
                error_messages=bounds_messages(
                    low=f"An idle timeout of {label} of at least 5 minutes.",
                    high=f"An idle timeout of {label} of at most 43,200 minutes (30 days).",
                ),
            )

    def values(self) -> dict[str, Any]:
        data = self.cleaned_data
        runtimes = {}
        idles = {}
        for kind in KIND_NAMES:
            hours = data.get(f"max_runtime_{kind}_hours")
            runtimes[kind] = None if hours is None else int(hours * 3600)
            minutes = data.get(f"idle_timeout_{kind}_minutes")
            idles[kind] = None if minutes is None else minutes * 60
        return {
            "allowed_classes": list(data["allowed_classes"]),
            "allowed_images": list(data["allowed_images"]),
            "max_gpu_milli_per_workload": milli_of(data.get("max_gpus")),
            "max_runtime_seconds": runtimes,
            "idle_timeout_seconds": idles,
            "exclusive_classes": list(data["exclusive_classes"]),
        }


def policy_initial(spec: Any) -> dict[str, Any]:
    """A PolicySpec as the form's initial values."""
    initial: dict[str, Any] = {
        "allowed_classes": sorted(spec.allowed_classes or ()),
        "allowed_images": sorted(spec.allowed_images or ()),
        "exclusive_classes": sorted(spec.exclusive_classes),
        "max_gpus": None
        if spec.max_gpu_milli_per_workload is None
        else Decimal(spec.max_gpu_milli_per_workload) / 1000,
    }
    for kind, seconds in spec.max_runtime_seconds.items():
        initial[f"max_runtime_{kind}_hours"] = Decimal(seconds) / 3600
    for kind, seconds in spec.default_idle_timeout_seconds.items():
        initial[f"idle_timeout_{kind}_minutes"] = seconds // 60
    return initial
