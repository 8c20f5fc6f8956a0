"""The request form of each kind: notebook, training job, sweep and inference endpoint, and
``REQUEST_FORMS``, the form of each kind by name."""

from __future__ import annotations

from typing import Any, ClassVar

from django import forms
from django.conf import settings
from django.db.models import QuerySet

from apps.catalog.models import Image
from apps.web.forms.workloads.base import WorkloadRequestForm
from apps.web.forms.workloads.fields import env_field
from apps.web.forms.workloads.parsing import parse_grid, parse_ranges
from apps.workloads import core, rules


class NotebookRequestForm(WorkloadRequestForm):
    kind = core.KIND_NOTEBOOK
    title = "New notebook"

    idle_timeout_minutes = forms.IntegerField(
        label="Idle timeout (minutes)",
        required=False,
        initial=60,
        error_messages={"invalid": rules.IDLE_TIMEOUT_OUT_OF_RANGE},
        help_text="Suspended after this long without GPU or Jupyter activity (5 minutes to 7 "
        "days); files are kept.",
    )
    env = env_field()

    field_order = [
        "name",
        "team",
        "gpu_class",
        "gpu_milli",
        "priority_class",
        "image",
        "env",
        "max_runtime_hours",
        "idle_timeout_minutes",
    ]


class _BatchFields(forms.Form):
    command = forms.CharField(
        error_messages={"required": rules.COMMAND_MISSING},
        help_text="The program to run, e.g. torchrun train.py; it replaces the image's entrypoint.",
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
    )
    args = forms.CharField(
        label="Arguments",
        required=False,
        help_text="Split like a shell does: --lr 3e-4 --data '/data/my set'.",
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
    )
    env = env_field()


class TrainingRequestForm(WorkloadRequestForm, _BatchFields):
    kind = core.KIND_TRAINING
    title = "New training job"

    replicas = forms.IntegerField(
        label="Nodes",
        initial=1,
        error_messages={"invalid": rules.REPLICAS_NOT_WHOLE},
        help_text="Replicas, one per node; more than one runs a multi-node (torchrun) job "
        "started all at once.",
    )
    retries = forms.IntegerField(
        initial=0,
        required=False,
        error_messages={"invalid": rules.RETRIES_OUT_OF_RANGE},
        help_text="Restarts on failure, up to 10.",
    )
    topology = forms.ChoiceField(
        label="Keep nodes together",
        required=False,
        help_text="With several nodes: their replicas inside one rack, block or NVLink domain "
        "(faster collectives). Required waits until one domain has room for all of them.",
    )

    field_order = [
        "name",
        "team",
        "gpu_class",
        "gpu_milli",
        "replicas",
        "topology",
        "priority_class",
        "image",
        "command",
        "args",
        "env",
        "max_runtime_hours",
        "retries",
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        levels = [name for name, _label in settings.SCHEDULING_TOPOLOGY_LEVELS]
        topology = self.fields["topology"]
        assert isinstance(topology, forms.ChoiceField)
        topology.choices = [("", "Anywhere")] + [
            choice
            for level in levels
            for choice in (
                (level, f"Prefer one {level}"),
                (f"{level}:required", f"One {level} (wait for it)"),
            )
        ]
        if not levels:
            del self.fields["topology"]
        self.fields["gpu_milli"].label = "GPUs per node"
        self.fields[
            "gpu_milli"
        ].help_text = (
            "Fractions are offered only where the class shares GPUs, and for one node only."
        )

    def replica_count(self) -> int | None:
        return self.cleaned_data.get("replicas")

    def topology_value(self) -> dict[str, Any] | None:
        chosen = str(self.cleaned_data.get("topology") or "")
        if not chosen:
            return None
        level, _, how = chosen.partition(":")
        return {"level": level, "required": how == "required"}


class SweepRequestForm(WorkloadRequestForm, _BatchFields):
    kind = core.KIND_SWEEP
    title = "New batch sweep"

    grid = forms.CharField(
        label="Parameter grid",
        required=False,  # or ranges to sample; the rules say when neither is given
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "mono"}),
        help_text="One name=value1,value2,… per line, at most "
        f"{rules.MAX_GRID_POINTS} points. Each point of the grid runs as its own job and sees "
        "its values as SWEEP_<NAME> environment variables and in the {name} placeholders of "
        "the command and arguments.",
    )
    parallelism = forms.IntegerField(
        label="Trials at once",
        required=False,
        error_messages={"invalid": rules.PARALLELISM_INVALID},
        help_text=f"How many trials may run at the same time (default {rules.DEFAULT_PARALLELISM}, "
        "at most the number of points). Each trial is admitted, charged and preempted on its own.",
    )
    ranges = forms.CharField(
        label="Or ranges to sample",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false", "class": "mono"}),
        help_text="Instead of a grid: one name=low..high per line, then log or int if so, e.g. "
        "lr=0.00001..0.001 log. Points are drawn at random, reproducibly from the seed.",
    )
    samples = forms.IntegerField(
        label="Points to sample",
        required=False,
        error_messages={"invalid": rules.SAMPLES_INVALID},
    )
    seed = forms.IntegerField(
        required=False,
        error_messages={"invalid": rules.SEED_INVALID},
        help_text="Empty: drawn for you and recorded.",
    )

    field_order = [
        "name",
        "team",
        "gpu_class",
        "gpu_milli",
        "grid",
        "ranges",
        "samples",
        "seed",
        "parallelism",
        "priority_class",
        "image",
        "command",
        "args",
        "env",
        "max_runtime_hours",
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_milli"].label = "GPU amount per point"
        self.fields["args"].help_text = (
            "Split like a shell does; {name} puts each trial's value of a parameter in, e.g. "
            "--lr={lr} --batch {batch}. Write {{ and }} for literal braces."
        )

    def clean_grid(self) -> dict[str, list[str]]:
        return parse_grid(self.cleaned_data.get("grid") or "")

    def grid_value(self) -> dict[str, list[str]] | None:
        return self.cleaned_data.get("grid")

    def parallelism_value(self) -> int | None:
        return self.cleaned_data.get("parallelism")

    def clean_ranges(self) -> dict[str, list[Any]]:
        return parse_ranges(self.cleaned_data.get("ranges") or "")

    def sampling_values(self) -> dict[str, Any]:
        data = self.cleaned_data
        ranges, samples = data.get("ranges") or None, data.get("samples")
        if ranges is None and samples is None:
            return {}
        return {"ranges": ranges, "samples": samples, "seed": data.get("seed")}

    def error_field(self, field: str) -> str | None:
        if field == "replicas":
            return "grid"
        return super().error_field(field)


class EndpointRequestForm(WorkloadRequestForm):
    kind = core.KIND_INFERENCE
    title = "New inference endpoint"

    # An endpoint runs until it is stopped and is never preempted.
    max_runtime_hours = None  # type: ignore[assignment]
    requeue_on_preemption = None  # type: ignore[assignment]

    model_path = forms.CharField(
        label="Model path",
        required=False,
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
        help_text="On the team's volumes: /team/models/… or /datasets/<name>/… of a dataset "
        "named below. The server finds it in GPUPAAS_MODEL_PATH.",
    )
    model_uri = forms.CharField(
        label="Or model URI",
        required=False,
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
        help_text="An object store: s3://, gs://, https:// or hf:// (GPUPAAS_MODEL_URI).",
    )
    model_secret = forms.CharField(
        label="Model store secret",
        required=False,
        help_text="A team or personal secret with the store's keys (GPUPAAS_MODEL_<KEY>).",
    )
    port = forms.IntegerField(
        initial=rules.DEFAULT_ENDPOINT_PORT,
        error_messages={"invalid": "The port is a whole number from 1024 to 65535."},
        help_text="The port the server listens on (1024–65535).",
    )
    health_path = forms.CharField(
        label="Health path",
        initial=rules.DEFAULT_HEALTH_PATH,
        help_text="Readiness and liveness probes ask here, e.g. /health or /v2/health/ready.",
    )
    min_replicas = forms.IntegerField(
        label="Min replicas",
        initial=1,
        error_messages={"invalid": "The minimum is a whole number."},
        help_text="0 scales to zero when idle (then give the idle minutes).",
    )
    max_replicas = forms.IntegerField(
        label="Max replicas",
        initial=1,
        error_messages={"invalid": "The maximum is a whole number."},
        help_text=f"At most {rules.MAX_ENDPOINT_REPLICAS}. Replicas beyond the team's "
        "guarantee wait: endpoints never run on borrowed GPUs.",
    )
    scale_metric = forms.ChoiceField(
        label="Scale on",
        choices=(("rps", "Requests per second"), ("gpu", "GPU utilisation")),
        initial="rps",
    )
    scale_target = forms.FloatField(
        label="Target per replica",
        required=False,
        error_messages={"invalid": "The scaling target is a number."},
        help_text="Requests/s per replica (default 10) or GPU utilisation in % (default 70).",
    )
    idle_minutes = forms.IntegerField(
        label="Scale to zero after (minutes idle)",
        required=False,
        error_messages={"invalid": "Give whole minutes."},
        help_text="With min replicas 0: the first call wakes it again.",
    )
    command = forms.CharField(
        required=False,
        help_text="Leave empty to run the image's own server; else the program to run.",
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
    )
    args = forms.CharField(
        label="Arguments",
        required=False,
        help_text="e.g. --model /team/models/llama --max-model-len 8192.",
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
    )
    env = env_field()

    field_order = [
        "name",
        "team",
        "gpu_class",
        "gpu_milli",
        "priority_class",
        "image",
        "model_path",
        "model_uri",
        "model_secret",
        "datasets",
        "port",
        "health_path",
        "min_replicas",
        "max_replicas",
        "scale_metric",
        "scale_target",
        "idle_minutes",
        "command",
        "args",
        "env",
        "secrets",
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["gpu_milli"].label = "GPU per replica"
        self.fields[
            "gpu_milli"
        ].help_text = "Fractions are offered only where the class shares GPUs."

    def images(self) -> QuerySet[Image]:
        return Image.objects.filter(enabled=True, kind=Image.Kind.SERVING)

    ENDPOINT_FIELDS: ClassVar[tuple[str, ...]] = (
        "port",
        "health_path",
        "min_replicas",
        "max_replicas",
        "model_path",
        "model_uri",
        "model_secret",
        "scale_metric",
        "scale_target",
        "idle_minutes",
    )

    def endpoint_value(self) -> dict[str, Any] | None:
        data = self.cleaned_data
        return {
            key: data.get(key) for key in self.ENDPOINT_FIELDS if data.get(key) not in (None, "")
        }


REQUEST_FORMS: dict[str, type[WorkloadRequestForm]] = {
    core.KIND_NOTEBOOK: NotebookRequestForm,
    core.KIND_TRAINING: TrainingRequestForm,
    core.KIND_SWEEP: SweepRequestForm,
    core.KIND_INFERENCE: EndpointRequestForm,
}
