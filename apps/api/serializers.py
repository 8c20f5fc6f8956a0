"""API shapes of workloads. Validation here is about the shape of the input only; the rules
(quotas, who may use which class, fractions) live in the services and their pure core."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from django.db import models
from django.utils import timezone
from rest_framework import serializers

from apps.workloads import core
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.selectors import WorkloadFilters

SUBMITTABLE_KINDS = (core.KIND_NOTEBOOK, core.KIND_TRAINING, core.KIND_SWEEP)
MAX_REPLICAS = 256
MAX_LIST_ITEMS = 200
MAX_GRID_POINTS = 1000


class WorkloadSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    gpu_class = serializers.CharField(source="gpu_class.name", read_only=True)
    image = serializers.CharField(source="image.name", read_only=True)
    total_milli = serializers.IntegerField(read_only=True)
    queue_position = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="Place in the team's queue while waiting."
    )
    estimated_start_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the scheduler expects to start it."
    )

    class Meta:
        model = Workload
        fields = [
            "id",
            "name",
            "kind",
            "state",
            "team",
            "owner",
            "gpu_class",
            "image",
            "gpu_milli",
            "replicas",
            "total_milli",
            "priority_class",
            "command",
            "args",
            "env",
            "max_runtime_seconds",
            "idle_timeout_seconds",
            "retries",
            "params",
            "last_reason",
            "queue_position",
            "estimated_start_at",
            "created_at",
            "queued_at",
            "admitted_at",
            "started_at",
            "finished_at",
            "updated_at",
        ]
        read_only_fields = fields


# The list is the hot read of the API (CLI polling, dashboards): its rows come as plain values
# (``ROW_VALUES``, in ``values()`` notation) from one query and are shaped here, which is
# several times cheaper per row than model instances and serializer fields.
# ``test_list_rows_equal_the_serializer`` keeps both shapes identical.
_RELATED = {
    "team": "team__slug",
    "owner": "owner__username",
    "gpu_class": "gpu_class__name",
    "image": "image__name",
}
_DATETIMES = {f.name for f in Workload._meta.fields if isinstance(f, models.DateTimeField)}
_COMPUTED = {"total_milli"}
ROW_VALUES = tuple(_RELATED.get(f, f) for f in WorkloadSerializer.Meta.fields if f not in _COMPUTED)
# (output name, value key, is a date-time) per field, in the serializer's order; the key is
# None for total_milli, the one computed field.
_ROW_PLAN = [
    (f, None if f in _COMPUTED else _RELATED.get(f, f), f in _DATETIMES)
    for f in WorkloadSerializer.Meta.fields
]


def _iso(value: datetime | None, tz: tzinfo) -> str | None:
    """As DRF's DateTimeField writes it: in the current time zone, UTC as "Z"."""
    if value is None:
        return None
    text = value.astimezone(tz).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def workload_rows(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """List rows from values keyed by ``ROW_VALUES``, shaped like :class:`WorkloadSerializer`."""
    tz = timezone.get_current_timezone()
    rows = []
    for v in values:
        rows.append(
            {
                name: (
                    v["gpu_milli"] * v["replicas"]
                    if key is None
                    else _iso(v[key], tz)
                    if is_datetime
                    else v[key]
                )
                for name, key, is_datetime in _ROW_PLAN
            }
        )
    return rows


class StringMapField(serializers.DictField):
    child = serializers.CharField(allow_blank=True, max_length=4096)


class WorkloadCreateSerializer(serializers.Serializer):
    """A request for GPUs. ``team`` may be left out by members of exactly one team."""

    kind = serializers.ChoiceField(choices=SUBMITTABLE_KINDS)
    name = serializers.CharField(max_length=100)
    team = serializers.SlugField(required=False, help_text="The team's slug.")
    gpu_class = serializers.CharField(max_length=64, help_text="A GPU class name, e.g. H100-80GB.")
    image = serializers.CharField(max_length=100, help_text="A catalogue image name.")
    gpu_milli = serializers.IntegerField(
        min_value=1, max_value=64_000, help_text="GPU per replica: 1000 = one GPU, 500 = half."
    )
    replicas = serializers.IntegerField(min_value=1, max_value=MAX_REPLICAS, default=1)
    priority_class = serializers.ChoiceField(
        choices=Workload.Priority.choices,
        required=False,
        help_text="Defaults by kind: notebook → development, training → training, sweep → batch.",
    )
    command = serializers.ListField(
        child=serializers.CharField(max_length=4096), max_length=MAX_LIST_ITEMS, default=list
    )
    args = serializers.ListField(
        child=serializers.CharField(max_length=4096, allow_blank=True),
        max_length=MAX_LIST_ITEMS,
        default=list,
    )
    env = StringMapField(default=dict)
    max_runtime_seconds = serializers.IntegerField(
        min_value=60, max_value=90 * 24 * 3600, required=False, allow_null=True
    )
    idle_timeout_seconds = serializers.IntegerField(
        min_value=60, max_value=30 * 24 * 3600, required=False, allow_null=True
    )
    retries = serializers.IntegerField(min_value=0, max_value=10, default=0)
    grid = serializers.DictField(
        child=serializers.ListField(
            child=serializers.CharField(max_length=256, allow_blank=True),
            min_length=1,
            max_length=MAX_GRID_POINTS,
        ),
        required=False,
        help_text="Sweeps: parameter → values; one batch job per point of the grid.",
    )

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not k or not (k[0].isalpha() or k[0] == "_")]
        if bad or any(not all(c.isalnum() or c == "_" for c in k) for k in value):
            raise serializers.ValidationError(
                "Environment variable names use letters, digits and _ and do not start "
                "with a digit."
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs["kind"]
        grid = attrs.get("grid")
        if kind == core.KIND_SWEEP:
            if not grid:
                raise serializers.ValidationError({"grid": "A sweep needs a parameter grid."})
            points = 1
            for values in grid.values():
                points *= len(values)
            if points > MAX_GRID_POINTS:
                raise serializers.ValidationError(
                    {"grid": f"The grid has {points} points; at most {MAX_GRID_POINTS}."}
                )
        elif grid:
            raise serializers.ValidationError({"grid": "Only sweeps take a parameter grid."})
        if kind != core.KIND_NOTEBOOK and not attrs.get("command"):
            raise serializers.ValidationError(
                {"command": 'A job or sweep needs a command, e.g. ["python", "train.py"].'}
            )
        if kind == core.KIND_NOTEBOOK and attrs.get("command"):
            raise serializers.ValidationError(
                {"command": "A notebook runs JupyterLab; it takes no command."}
            )
        return attrs


class WorkloadListQuerySerializer(serializers.Serializer):
    """Filters of the workload list; several states or kinds may be given comma-separated."""

    state = serializers.CharField(required=False, help_text="e.g. running or queued,pending")
    kind = serializers.CharField(required=False, help_text="e.g. notebook or training,sweep")
    team = serializers.SlugField(required=False)
    owner = serializers.CharField(required=False, help_text="A username, or me.")
    gpu_class = serializers.CharField(required=False)
    priority_class = serializers.ChoiceField(choices=Workload.Priority.choices, required=False)
    search = serializers.CharField(required=False, max_length=100, help_text="Part of the name.")

    @staticmethod
    def _choices(value: str, allowed: list[str], what: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        unknown = [v for v in items if v not in allowed]
        if unknown or not items:
            raise serializers.ValidationError(
                f"Unknown {what} {', '.join(unknown) or '(empty)'}; use {', '.join(allowed)}."
            )
        return items

    def validate_state(self, value: str) -> list[str]:
        return self._choices(value, list(Workload.State.values), "state")

    def validate_kind(self, value: str) -> list[str]:
        return self._choices(value, list(Workload.Kind.values), "kind")

    def filters(self) -> WorkloadFilters:
        f: dict[str, Any] = self.validated_data
        return WorkloadFilters(
            states=tuple(f.get("state", ())),
            kinds=tuple(f.get("kind", ())),
            team=f.get("team"),
            owner=f.get("owner"),
            gpu_class=f.get("gpu_class"),
            priority_class=f.get("priority_class"),
            search=f.get("search"),
        )


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)


class WorkloadEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.username", read_only=True, allow_null=True)

    class Meta:
        model = WorkloadEvent
        fields = ["created_at", "from_state", "to_state", "reason", "actor"]
        read_only_fields = fields


class ClusterEventSerializer(serializers.Serializer):
    time = serializers.DateTimeField(allow_null=True)
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    object = serializers.CharField()
    count = serializers.IntegerField()


class WorkloadEventsSerializer(serializers.Serializer):
    events = WorkloadEventSerializer(many=True, help_text="State changes, oldest first.")
    cluster_events = ClusterEventSerializer(many=True, help_text="Kubernetes events.")
    cluster_events_unavailable = serializers.CharField(
        allow_null=True, help_text="Why Kubernetes events could not be shown, if so."
    )
