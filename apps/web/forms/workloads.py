"""Portal forms: one request form per kind of workload, templates, sizing and team filters.

Request forms only parse what the user typed (a text area into a dict, hours into seconds);
what a request may be is the one rule set of every door, :mod:`apps.workloads.rules`, which
``workload_submit`` applies and whose messages the views put back on the fields they concern.
So the selects offer what the user may pick, but a value outside them is passed on for the
rules to refuse in their own words, exactly as the API does.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from decimal import Decimal
from typing import Any, ClassVar

from django import forms
from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Model, Q, QuerySet

from apps.accounts.models import Membership, Team, User
from apps.accounts.selectors import is_team_lead, teams_of
from apps.catalog.models import GpuClass, Image
from apps.orchestration.selectors import gpu_class_spec
from apps.quotas.core import format_milli
from apps.workloads import core, rules, sizing
from apps.workloads.models import Workload
from apps.workloads.selectors import (
    SORT_LABELS,
    ClassOffer,
    WorkloadFilters,
    class_offers_for_team,
    day_start,
)

PRIORITY_HELP = {
    core.PRIORITY_PRODUCTION: "live inference; never preempted (leads only)",
    core.PRIORITY_TRAINING: "active training runs; preempted only by production",
    core.PRIORITY_DEVELOPMENT: "notebooks and interactive work",
    core.PRIORITY_BATCH: "background work on idle GPUs; preempted by any higher class",
}
# Service fields that the form asks for in other units.
FORM_FIELDS = {
    "max_runtime_seconds": "max_runtime_hours",
    "idle_timeout_seconds": "idle_timeout_minutes",
}


def split_command(value: str, what: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise forms.ValidationError(f"The {what} has unbalanced quotes ({exc}).") from exc


def parse_env(text: str) -> dict[str, str]:
    """``NAME=value`` lines (blank lines and ``#`` comments ignored) as a dict. Which names
    and how many are allowed is the request rules' to say."""
    env: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep:
            raise forms.ValidationError(
                f"Line {number}: write NAME=value, with a name of letters, digits and _ "
                f"that does not start with a digit (got “{line[:40]}”)."
            )
        if name in env:
            raise forms.ValidationError(f"Line {number}: {name} is set twice.")
        env[name] = value
    return env


def parse_secret_refs(text: str) -> list[dict[str, str]]:
    """``NAME[:ENV[=KEY]]`` lines (as the CLI's ``--secret``) as references. Whether the secrets
    exist and may be used is the request rules' to say."""
    refs: list[dict[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(":")
        env, _, key = rest.partition("=")
        ref = {"name": name.strip()}
        if env.strip():
            ref["env"] = env.strip()
        if key.strip():
            ref["key"] = key.strip()
        refs.append(ref)
    return refs


def _number(text: str) -> int | float:
    value = float(text)
    return (
        int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    )


def parse_ranges(text: str) -> dict[str, list[Any]]:
    """``name=low..high [scale]`` lines as ranges to sample. Which names, bounds and scales are
    allowed is the request rules' to say."""
    ranges: dict[str, list[Any]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, rest = line.partition("=")
        name = name.strip()
        bounds, *scale = rest.split() or [""]
        low, dots, high = bounds.partition("..")
        try:
            spec: list[Any] = [_number(low), _number(high), *scale[:1]]
        except ValueError:
            spec = []
        if not sep or not name or not dots or not spec or len(scale) > 1:
            raise forms.ValidationError(
                f"Line {number}: write name=low..high, then log or int if so (got “{line[:40]}”)."
            )
        if name in ranges:
            raise forms.ValidationError(f"Line {number}: {name} is listed twice.")
        ranges[name] = spec
    return ranges


def parse_grid(text: str) -> dict[str, list[str]]:
    """``name=v1,v2,v3`` lines as a parameter grid. Which names and how many points are allowed
    is the request rules' to say."""
    grid: dict[str, list[str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, values = line.partition("=")
        name = name.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not items:
            raise forms.ValidationError(
                f"Line {number}: write name=value1,value2,… (got “{line[:40]}”)."
            )
        if name in grid:
            raise forms.ValidationError(f"Line {number}: {name} is listed twice.")
        grid[name] = items
    return grid


def _pk(value: Any) -> int | None:
    if isinstance(value, GpuClass | Team | Image):
        return value.pk
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


class CatalogChoiceField(forms.ModelChoiceField):
    """Offers (renders) its queryset, but accepts any row of ``lookup``: a class or an image
    that is withdrawn, or not for this kind, is refused by the request rules with their
    message (the same the API gives), not as "not one of the choices"."""

    def __init__(self, *args: Any, lookup: QuerySet[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lookup = lookup

    def to_python(self, value: Any) -> Model | None:
        if value in self.empty_values:
            return None
        try:
            found: Model = self.lookup.get(pk=value)
        except (ValueError, TypeError, ObjectDoesNotExist, forms.ValidationError):
            raise forms.ValidationError(
                self.error_messages["invalid_choice"], code="invalid_choice"
            ) from None
        return found


class RuleChoiceField(forms.ChoiceField):
    """Renders its choices (what the user may pick); any value is passed on for the request
    rules to judge."""

    def validate(self, value: Any) -> None:
        forms.Field.validate(self, value)


class WorkloadRequestForm(forms.Form):
    """The fields every kind shares. Subclasses add what their kind needs."""

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    GPU_FIELDS: ClassVar[tuple[str, ...]] = ("gpu_class", "gpu_milli")

    name = forms.CharField(
        widget=forms.TextInput(attrs={"maxlength": rules.MAX_NAME_LENGTH}),
        error_messages={"required": rules.NAME_MISSING},
        help_text="Shown in lists and on the workload page, e.g. “resnet-sweep”.",
    )
    team = forms.ModelChoiceField(
        queryset=Team.objects.none(),
        empty_label=None,
        help_text="Whose quota it uses; it runs in that team's namespace.",
    )
    secrets = forms.CharField(
        label="Secrets",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false", "class": "mono"}),
        help_text="Credentials by name, one per line: NAME:ENV=KEY sets ENV to the secret's "
        "key (e.g. hf:HF_TOKEN=token); NAME alone sets every key as a variable. The team's "
        "secrets and your own, from the Secrets page; values are never shown.",
    )
    datasets = forms.CharField(
        label="Datasets",
        required=False,
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono"}),
        help_text="The team's datasets by name, separated by spaces or commas (e.g. imagenet), "
        "from the Datasets page: a volume claim is mounted read-only at /datasets/<name>.",
    )
    gpu_class = CatalogChoiceField(
        queryset=GpuClass.objects.none(),
        lookup=GpuClass.objects.all(),
        empty_label=None,
        label="GPU class",
    )
    gpu_milli = forms.IntegerField(
        label="GPU amount",
        widget=forms.Select,
        error_messages={"invalid": rules.AMOUNT_NOT_WHOLE},
    )
    priority_class = RuleChoiceField(label="Priority class", choices=(), required=False)
    image = CatalogChoiceField(
        queryset=Image.objects.none(),
        lookup=Image.objects.all(),
        empty_label=None,
        help_text="From the curated catalog.",
    )
    max_runtime_hours = forms.DecimalField(
        label="Max runtime (hours)",
        required=False,
        decimal_places=2,
        error_messages={"invalid": rules.RUNTIME_OUT_OF_RANGE},
        help_text="Stopped after this long (state “expired”), at most 720 hours. Empty: no limit.",
    )

    requeue_on_preemption = forms.TypedChoiceField(
        label="When preempted",
        choices=(("yes", "Back in the queue, resume from the checkpoint"), ("no", "End it")),
        coerce=lambda value: value != "no",
        empty_value="yes",  # left out: requeue, as the API defaults
        required=False,
        initial="yes",
        help_text="A higher class may preempt it; it gets its grace period to save a checkpoint "
        "in GPUPAAS_CHECKPOINT_DIR first.",
    )

    # Shown (and asked) only when submitting would preempt the user's or a teammate's work.
    confirm_preemption = forms.BooleanField(
        label="I understand; stop them",
        required=False,
        help_text="They get their grace period to save a checkpoint first.",
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        teams = Team.objects.order_by("name") if user.is_staff else teams_of(user)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        self.selected_team: Team | None = self._selected(teams, "team")
        # Only the classes the team may use are offered; the others are listed with the reason.
        self.class_offers = class_offers_for_team(self.selected_team, admin=user.is_staff)
        usable = [o.gpu_class.pk for o in self.class_offers if o.usable]
        classes = GpuClass.objects.filter(pk__in=usable).order_by("name")
        self.fields["gpu_class"].queryset = classes  # type: ignore[attr-defined]
        self.fields["image"].queryset = self.images()  # type: ignore[attr-defined]
        self.selected_class = self._selected(classes, "gpu_class")
        self.fields["gpu_milli"].widget.choices = self.amount_choices()
        self.fields["priority_class"].choices = self.priority_choices(  # type: ignore[attr-defined]
            self.selected_team
        )
        if not self.is_bound:
            self.initial.setdefault("priority_class", core.DEFAULT_PRIORITY[self.kind])
            if self.selected_class is not None and "gpu_class" not in self.initial:
                self.initial["gpu_class"] = self.selected_class.pk
            if "gpu_milli" not in self.initial:
                choices = self.offered_amounts()
                self.initial["gpu_milli"] = choices[0] if choices else None

    # --- what the user may choose -----------------------------------------------------------

    def images(self) -> QuerySet[Image]:
        wanted = Image.Kind.NOTEBOOK if self.kind == core.KIND_NOTEBOOK else Image.Kind.TRAINING
        return Image.objects.filter(enabled=True).filter(Q(kind=wanted) | Q(kind=Image.Kind.ANY))

    def _raw(self, name: str) -> Any:
        if self.is_bound:
            return self.data.get(self.add_prefix(name))
        return self.initial.get(name)

    def _selected(self, queryset: QuerySet[Any], name: str) -> Any:
        pk = _pk(self._raw(name))
        chosen = queryset.filter(pk=pk).first() if pk is not None else None
        return chosen or queryset.first()

    def amount_choices(self) -> list[tuple[int, str]]:
        if self.selected_class is None:
            return []
        spec = gpu_class_spec(self.selected_class)
        return [
            (milli, f"{sizing.amount_label(milli)} — {sizing.describe_amount(milli, spec)}")
            for milli in sizing.amount_choices(spec)
        ]

    def offered_amounts(self) -> list[int]:
        return [c for c, _ in self.fields["gpu_milli"].widget.choices]

    def priority_choices(self, team: Team | None) -> list[tuple[str, str]]:
        is_lead = team is not None and is_team_lead(self.user, team.pk)
        allowed = core.allowed_priorities(self.kind, is_lead=is_lead, is_admin=self.user.is_staff)
        labels = dict(Workload.Priority.choices)
        return [(p, f"{labels[p]} — {PRIORITY_HELP[p]}") for p in allowed]

    def unavailable_classes(self) -> list[ClassOffer]:
        return [o for o in self.class_offers if not o.usable]

    def selected_offer(self) -> ClassOffer | None:
        chosen = self.selected_class
        return next((o for o in self.class_offers if chosen and o.gpu_class.pk == chosen.pk), None)

    def selected_amount(self) -> int | None:
        milli = _pk(self._raw("gpu_milli"))
        choices = self.offered_amounts()
        if milli not in choices:
            milli = choices[0] if choices else None
        return milli

    def quota_left(self) -> str:
        """What the team has left of its limit on the chosen class now, in words."""
        offer = self.selected_offer()
        if offer is None or offer.usage is None or self.selected_team is None:
            return ""
        u = offer.usage
        return (
            f"{format_milli(offer.left_milli)} of {format_milli(u.limit_milli)} GPU left in "
            f"{self.selected_team.name}'s limit on {offer.gpu_class.name} "
            f"({format_milli(u.used_milli)} in use, {format_milli(u.guaranteed_milli)} "
            "guaranteed)"
        )

    def hourly_cost(self) -> Decimal | None:
        """What one replica of the chosen amount costs per hour, as the cluster charges it."""
        milli = self.selected_amount()
        if self.selected_class is None or milli is None:
            return None
        charged = rules.charged_milli_of(milli, self.selected_class)
        return (Decimal(charged) * self.selected_class.hourly_cost / 1000).quantize(Decimal("0.01"))

    def gpu_preview(self) -> str:
        """What the chosen amount becomes on the chosen class, in words."""
        if self.selected_class is None:
            if self.class_offers:
                return "Your team may use none of the GPU classes offered (see below)."
            return "No GPU class is offered at the moment."
        milli = self.selected_amount()
        if milli is None:
            return "This class offers no amount."
        return sizing.describe_amount(milli, gpu_class_spec(self.selected_class))

    # --- what it becomes ----------------------------------------------------------------------

    def clean_command(self) -> list[str]:
        return split_command(self.cleaned_data.get("command") or "", "command")

    def clean_args(self) -> list[str]:
        return split_command(self.cleaned_data.get("args") or "", "arguments")

    def clean_env(self) -> dict[str, str]:
        return parse_env(self.cleaned_data.get("env") or "")

    def clean_secrets(self) -> list[dict[str, str]]:
        return parse_secret_refs(self.cleaned_data.get("secrets") or "")

    def clean_datasets(self) -> list[str]:
        # Whether they exist in the team is the request rules' to say.
        return (self.cleaned_data.get("datasets") or "").replace(",", " ").split()

    def replica_count(self) -> int | None:
        """Replicas as typed; None: the rules derive them (one; a sweep's grid points)."""
        return None

    def grid_value(self) -> dict[str, list[str]] | None:
        return None

    def parallelism_value(self) -> int | None:
        return None

    def sampling_values(self) -> dict[str, Any]:
        return {}

    def submit_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``workload_submit`` (after ``is_valid()``)."""
        data = self.cleaned_data
        hours = data.get("max_runtime_hours")
        minutes = data.get("idle_timeout_minutes")
        retries = data.get("retries")
        return {
            "team": data["team"],
            "kind": self.kind,
            "name": data["name"],
            "gpu_class": data["gpu_class"],
            "image": data["image"],
            "gpu_milli": data["gpu_milli"],
            "replicas": self.replica_count(),
            "priority_class": data.get("priority_class") or None,
            "command": data.get("command") or [],
            "args": data.get("args") or [],
            "env": data.get("env") or {},
            "secrets": data.get("secrets") or [],
            "datasets": data.get("datasets") or [],
            "max_runtime_seconds": None if hours is None else int(hours * 3600),
            "idle_timeout_seconds": None if minutes is None else int(minutes) * 60,
            "retries": 0 if retries is None else retries,
            "requeue_on_preemption": data.get("requeue_on_preemption") is not False,
            "grid": self.grid_value(),
            "parallelism": self.parallelism_value(),
            **self.sampling_values(),
        }

    def request(self) -> rules.WorkloadRequest:
        """The request as the rules read it (after ``is_valid()``), for the dry runs."""
        data = self.submit_kwargs()
        for lookup in ("team", "gpu_class", "image"):
            data.pop(lookup)
        return rules.WorkloadRequest(
            **{
                **data,
                "command": tuple(data["command"]),
                "args": tuple(data["args"]),
                "secrets": tuple(rules.SecretRef.of(ref) for ref in data["secrets"]),
                "endpoint": rules.EndpointRequest.of(data["endpoint"])
                if data.get("endpoint") is not None
                else None,
            }
        )

    def template_values(self) -> dict[str, str]:
        """What the user typed, field by field, to start a new request from later."""
        return {
            name: str(self.data.get(self.add_prefix(name), ""))
            for name in self.fields
            if self.data.get(self.add_prefix(name)) not in (None, "")
        }

    def error_field(self, field: str) -> str | None:
        """The form field a rule's message on ``field`` belongs to (None: the whole form)."""
        if field == "replicas":
            return "replicas" if "replicas" in self.fields else "gpu_milli"
        field = FORM_FIELDS.get(field, field)
        return field if field in self.fields else None


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
    env = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One NAME=value per line.",
    )

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
    env = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One NAME=value per line.",
    )


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

    field_order = [
        "name",
        "team",
        "gpu_class",
        "gpu_milli",
        "replicas",
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
        self.fields["gpu_milli"].label = "GPUs per node"
        self.fields[
            "gpu_milli"
        ].help_text = (
            "Fractions are offered only where the class shares GPUs, and for one node only."
        )

    def replica_count(self) -> int | None:
        return self.cleaned_data.get("replicas")


class SweepRequestForm(WorkloadRequestForm, _BatchFields):
    kind = core.KIND_SWEEP
    title = "New batch sweep"

    grid = forms.CharField(
        label="Parameter grid",
        required=False,  # or ranges to sample; the rules say when neither is given
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "class": "mono"}),
        help_text="One name=value1,value2,… per line, at most "
        f"{rules.MAX_GRID_POINTS} points. Each point of the grid runs as its own job and sees "
        "its values as SWEEP_<NAME> environment variables.",
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


def _hours(seconds: int) -> Decimal:
    """Seconds as the form's hours: exact where two decimals hold them, else rounded."""
    hours = Decimal(seconds) / 3600
    cents = hours.quantize(Decimal("0.01"))
    return hours if hours == cents else cents


def clone_initial(workload: Workload) -> dict[str, Any]:
    """A recorded request as the initial values of its kind's form: what the user typed, as
    near as the form can show it, under the name "… (copy)"."""
    hours = workload.max_runtime_seconds
    minutes = workload.idle_timeout_seconds
    grid = (workload.params or {}).get("grid") or {}
    secrets = []
    for ref in workload.secrets or []:
        line = str(ref.get("name", ""))
        if ref.get("env"):
            line += f":{ref['env']}" + (f"={ref['key']}" if ref.get("key") else "")
        secrets.append(line)
    values: dict[str, Any] = {
        "name": f"{workload.name} (copy)"[: rules.MAX_NAME_LENGTH],
        "team": workload.team_id,
        "gpu_class": workload.gpu_class_id,
        "gpu_milli": workload.gpu_milli,
        "priority_class": workload.priority_class,
        "image": workload.image_id,
        "max_runtime_hours": None if hours is None else _hours(hours),
        "idle_timeout_minutes": None if minutes is None else minutes // 60,
        "requeue_on_preemption": "yes" if workload.requeue_on_preemption else "no",
        "env": "\n".join(f"{k}={v}" for k, v in (workload.env or {}).items()),
        "secrets": "\n".join(secrets),
        "datasets": " ".join(
            str(d["name"]) for d in workload.datasets or [] if isinstance(d, dict) and d.get("name")
        ),
        "command": shlex.join(workload.command or []),
        "args": shlex.join(workload.args or []),
        "replicas": workload.replicas,
        "retries": workload.retries,
        "grid": "\n".join(f"{k}={','.join(map(str, v))}" for k, v in grid.items()),
    }
    params = workload.params or {}
    if workload.kind == core.KIND_SWEEP:
        ranges = params.get("ranges") or {}
        values["parallelism"] = params.get("parallelism")
        values["samples"] = params.get("samples")
        values["seed"] = params.get("seed")
        values["ranges"] = "\n".join(
            f"{k}={v[0]}..{v[1]}" + (f" {v[2]}" if len(v) > 2 and v[2] != "linear" else "")
            for k, v in ranges.items()
            if isinstance(v, list | tuple) and len(v) >= 2
        )
        if ranges:
            values["grid"] = ""
    endpoint = params.get("endpoint")
    if workload.kind == core.KIND_INFERENCE and isinstance(endpoint, dict):
        values.pop("replicas", None)
        for key in EndpointRequestForm.ENDPOINT_FIELDS:
            if endpoint.get(key) not in (None, ""):
                values[key] = endpoint[key]
    return {k: v for k, v in values.items() if v is not None}


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
    env = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One NAME=value per line.",
    )

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

    def submit_kwargs(self) -> dict[str, Any]:
        kwargs = super().submit_kwargs()
        data = self.cleaned_data
        kwargs["endpoint"] = {
            key: data.get(key) for key in self.ENDPOINT_FIELDS if data.get(key) not in (None, "")
        }
        return kwargs


REQUEST_FORMS: dict[str, type[WorkloadRequestForm]] = {
    core.KIND_NOTEBOOK: NotebookRequestForm,
    core.KIND_TRAINING: TrainingRequestForm,
    core.KIND_SWEEP: SweepRequestForm,
    core.KIND_INFERENCE: EndpointRequestForm,
}


class TemplateSaveForm(forms.Form):
    """Saving the request being typed as a named template (prefix ``template``)."""

    name = forms.CharField(
        label="Template name", max_length=100, help_text="e.g. “7B LoRA on a MIG slice”."
    )
    share = forms.BooleanField(
        label="Share with my team", required=False, help_text="Teammates can start from it too."
    )


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
