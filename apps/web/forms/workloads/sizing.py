"""The sizing helper's form: a model's size and use, for the memory it needs."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from apps.workloads import sizing


class SizingForm(forms.Form):
    params_billions = forms.DecimalField(
        label="Model parameters (billions)",
        min_value=Decimal("0.01"),
        max_value=Decimal("10000"),
        decimal_places=3,
        initial=Decimal("7"),
    )
    precision = forms.ChoiceField(
        choices=list(sizing.PRECISION_LABELS.items()), initial="bf16", label="Precision"
    )
    task = forms.ChoiceField(
        choices=list(sizing.TASK_LABELS.items()), initial=sizing.TASK_INFERENCE, label="Task"
    )
    context = forms.IntegerField(
        label="Context length (tokens)",
        min_value=1,
        max_value=1_048_576,
        initial=4096,
        required=False,
        help_text="Per sequence: prompt and output (inference), or training sequence length.",
    )
    batch = forms.IntegerField(
        label="Batch size", min_value=1, max_value=4096, initial=1, required=False
    )
    layers = forms.IntegerField(
        label="Layers", min_value=1, max_value=1000, required=False, help_text="Optional."
    )
    heads = forms.IntegerField(
        label="Attention heads", min_value=1, max_value=1024, required=False, help_text="Optional."
    )
    kv_heads = forms.IntegerField(
        label="Key-value heads",
        min_value=1,
        max_value=1024,
        required=False,
        help_text="Optional; fewer than the heads with grouped-query attention.",
    )
    lora_rank = forms.IntegerField(
        label="LoRA rank", min_value=1, max_value=4096, initial=16, required=False
    )
    checkpointing = forms.TypedChoiceField(
        label="Activation checkpointing",
        choices=(("yes", "Yes (recompute in the backward pass)"), ("no", "No")),
        coerce=lambda value: value != "no",
        empty_value="yes",  # left out: checkpointing on
        initial="yes",
        required=False,
    )

    def known(self) -> dict[str, Any]:
        """What ``sizing.size_request`` takes besides size, precision and task."""
        data = self.cleaned_data
        known: dict[str, Any] = {
            "context": data.get("context") or 4096,
            "batch": data.get("batch") or 1,
            "lora_rank": data.get("lora_rank") or 16,
            "checkpointing": data.get("checkpointing") not in (False, "no"),
        }
        for name in ("layers", "heads", "kv_heads"):
            if data.get(name):
                known[name] = data[name]
        return known
