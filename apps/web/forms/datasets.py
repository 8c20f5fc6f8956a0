"""The Datasets page's form: a lead registers a volume claim or an object-store prefix."""

from __future__ import annotations

from django import forms

from apps.datasets import core


class DatasetRegisterForm(forms.Form):
    name = forms.CharField(
        max_length=core.MAX_NAME_LENGTH,
        help_text="Lower-case letters, digits and -; requests name it (e.g. imagenet).",
    )
    kind = forms.ChoiceField(
        choices=[
            (core.KIND_CLAIM, "Volume claim in the team namespace"),
            (core.KIND_OBJECT, "Object-store prefix"),
        ]
    )
    claim = forms.CharField(
        required=False,
        max_length=253,
        help_text="Volume claim: its name; mounted read-only at /datasets/<name>.",
    )
    uri = forms.CharField(
        label="Prefix",
        required=False,
        max_length=core.MAX_URI_LENGTH,
        help_text="Object store: e.g. s3://bucket/imagenet/, given to pods as "
        "GPUPAAS_DATASET_<NAME>_URI (not mounted).",
    )
    secret = forms.CharField(
        required=False,
        max_length=40,
        help_text="Object store: a team secret whose keys the pods get.",
    )
