"""The request form every kind shares: what the user may choose (teams, classes, amounts,
priorities, images), what it would cost, and the request it becomes (``request()``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar

from django import forms
from django.db.models import Q, QuerySet

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import is_team_lead, platform_may, teams_of
from apps.catalog.core import IMAGE_AVAILABLE, IMAGE_MISSING
from apps.catalog.models import GpuClass, Image
from apps.catalog.selectors import image_availability
from apps.orchestration.selectors import gpu_class_spec
from apps.quotas.core import format_milli
from apps.web.forms.workloads.fields import CatalogChoiceField, RuleChoiceField, pk_of
from apps.web.forms.workloads.parsing import parse_env, parse_secret_refs, split_command
from apps.workloads import core, rules, sizing
from apps.workloads.models import Workload
from apps.workloads.request import WorkloadRequest
from apps.workloads.selectors import (
    ClassOffer,
    class_offers_for_team,
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
        help_text="From the curated catalog; each says which clusters' nodes of the GPU class "
        "hold it (where they report their images).",
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
        acts_for_teams = platform_may(user, Act.ACT_FOR_TEAMS)
        teams = Team.objects.order_by("name") if acts_for_teams else teams_of(user)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        self.selected_team: Team | None = self._selected(teams, "team")
        # Only the classes the team may use are offered; the others are listed with the reason.
        self.class_offers = class_offers_for_team(self.selected_team, admin=acts_for_teams)
        usable = [o.gpu_class.pk for o in self.class_offers if o.usable]
        classes = GpuClass.objects.filter(pk__in=usable).order_by("name")
        self.fields["gpu_class"].queryset = classes  # type: ignore[attr-defined]
        self.fields["image"].queryset = self.images()  # type: ignore[attr-defined]
        self.selected_class = self._selected(classes, "gpu_class")
        # Which clusters' nodes of the chosen class hold each image (from what they report).
        self.image_clusters = image_availability(self.images(), gpu_class=self.selected_class)
        image_field = self.fields["image"]
        if isinstance(image_field, CatalogChoiceField):
            image_field.describe = self.image_label
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

    def image_label(self, image: Image) -> str:
        """An image as the picker offers it: with the clusters that hold it, or lack it."""
        clusters = self.image_clusters.get(image.name, ())
        held = [c.cluster for c in clusters if c.status == IMAGE_AVAILABLE]
        lacking = [c.cluster for c in clusters if c.status == IMAGE_MISSING]
        if held:
            return f"{image.name} — on {', '.join(held)}"
        if lacking and len(lacking) == len(clusters):
            return f"{image.name} — not available on {', '.join(lacking)}"
        return image.name

    def _raw(self, name: str) -> Any:
        if self.is_bound:
            return self.data.get(self.add_prefix(name))
        return self.initial.get(name)

    def _selected(self, queryset: QuerySet[Any], name: str) -> Any:
        pk = pk_of(self._raw(name))
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
        is_admin = platform_may(self.user, Act.ACT_FOR_TEAMS)
        allowed = core.allowed_priorities(self.kind, is_lead=is_lead, is_admin=is_admin)
        labels = dict(Workload.Priority.choices)
        return [(p, f"{labels[p]} — {PRIORITY_HELP[p]}") for p in allowed]

    def unavailable_classes(self) -> list[ClassOffer]:
        return [o for o in self.class_offers if not o.usable]

    def selected_offer(self) -> ClassOffer | None:
        chosen = self.selected_class
        return next((o for o in self.class_offers if chosen and o.gpu_class.pk == chosen.pk), None)

    def selected_amount(self) -> int | None:
        milli = pk_of(self._raw("gpu_milli"))
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

    def endpoint_value(self) -> dict[str, Any] | None:
        """An endpoint's settings as typed (None: not an endpoint)."""
        return None

    def topology_value(self) -> dict[str, Any] | None:
        """A multi-node job's topology ask (None: anywhere)."""
        return None

    def request(self) -> WorkloadRequest:
        """The request as the rules read it and ``workload_submit`` takes it (after
        ``is_valid()``); the team, the GPU class and the image are in ``cleaned_data``."""
        data = self.cleaned_data
        hours = data.get("max_runtime_hours")
        minutes = data.get("idle_timeout_minutes")
        retries = data.get("retries")
        return WorkloadRequest.of(
            kind=self.kind,
            name=data["name"],
            gpu_milli=data["gpu_milli"],
            replicas=self.replica_count(),
            priority_class=data.get("priority_class") or None,
            command=data.get("command"),
            args=data.get("args"),
            env=data.get("env"),
            secrets=data.get("secrets"),
            datasets=data.get("datasets"),
            max_runtime_seconds=None if hours is None else int(hours * 3600),
            idle_timeout_seconds=None if minutes is None else int(minutes) * 60,
            retries=0 if retries is None else retries,
            requeue_on_preemption=data.get("requeue_on_preemption") is not False,
            grid=self.grid_value(),
            parallelism=self.parallelism_value(),
            endpoint=self.endpoint_value(),
            topology=self.topology_value(),
            **self.sampling_values(),
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
