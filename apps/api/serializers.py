"""API shapes of workloads. Validation here is about the shape of the input only; what a
request may be is the one rule set of every door, :mod:`apps.workloads.rules`."""

from __future__ import annotations

from datetime import datetime, tzinfo
from typing import Any

from django.db import models
from django.utils import timezone
from rest_framework import serializers

from apps.workloads import rules
from apps.workloads.models import Workload, WorkloadEvent
from apps.workloads.request import WorkloadRequest
from apps.workloads.selectors import SORT_LABELS, WorkloadFilters, day_start


class WorkloadSerializer(serializers.ModelSerializer):
    team = serializers.CharField(source="team.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    gpu_class = serializers.CharField(source="gpu_class.name", read_only=True)
    image = serializers.CharField(source="image.name", read_only=True)
    total_milli = serializers.IntegerField(
        read_only=True,
        help_text="What it is charged: replicas × charged_milli (what the cluster grants).",
    )
    queue_position = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="Place in the team's queue while waiting."
    )
    estimated_start_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the scheduler expects to start it."
    )
    sweep = serializers.IntegerField(
        source="sweep_id",
        read_only=True,
        allow_null=True,
        help_text="A trial: the id of its sweep (GET /workloads/<sweep>/trials/ lists them all).",
    )
    trial_index = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="A trial: its point of the sweep's grid."
    )
    exit_code = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="The program's exit code, once it ended."
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
            "charged_milli",
            "replicas",
            "total_milli",
            "priority_class",
            "requeue_on_preemption",
            "command",
            "args",
            "env",
            "secrets",
            "datasets",
            "max_runtime_seconds",
            "idle_timeout_seconds",
            "retries",
            "params",
            "sweep",
            "trial_index",
            "exit_code",
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
                    v["charged_milli"] * v["replicas"]
                    if key is None
                    else _iso(v[key], tz)
                    if is_datetime
                    else v[key]
                )
                for name, key, is_datetime in _ROW_PLAN
            }
        )
    return rows


class PassThroughChoiceField(serializers.ChoiceField):
    """Documents its choices (an enum in the OpenAPI description) but passes any text on:
    whether it is one of them is the request rules' to say, in their words."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, bool) or not isinstance(data, str | int):
            self.fail("invalid_choice", input=data)
        return str(data)


def _words(**kw: Any) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False), **kw
    )


class SecretRefSerializer(serializers.Serializer):
    """A reference to a secret of the team, by name; its value is never part of a request."""

    name = serializers.CharField(help_text="A team secret, or your own personal secret.")
    env = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The variable that takes the key's value; left out: every key of the secret "
        "becomes a variable of its name.",
    )
    key = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The secret's key; may be left out when the secret has one key.",
    )


CONFIRM_PREEMPTION_HELP = (
    "Submit even though starting it now preempts running work of yours or your teammates "
    "(without it such a request is answered 409 with `would_preempt`). Another team's "
    "borrowed capacity is reclaimed without asking."
)


class EndpointSettingsSerializer(serializers.Serializer):
    """An inference endpoint's own settings (kind ``inference``). Checked by the request rules,
    with the same field messages as the portal's and the CLI's."""

    port = serializers.JSONField(
        required=False, help_text="The server's port, 1024 to 65535 (default 8000)."
    )
    health_path = serializers.JSONField(
        required=False, help_text="Readiness and liveness are probed here (default /health)."
    )
    min_replicas = serializers.JSONField(
        required=False,
        help_text=f"0 to {rules.MAX_ENDPOINT_REPLICAS} (default 1); 0 scales to zero when idle.",
    )
    max_replicas = serializers.JSONField(
        required=False, help_text=f"1 to {rules.MAX_ENDPOINT_REPLICAS} (default 1)."
    )
    model_path = serializers.JSONField(
        required=False,
        help_text="The model on the team's volumes: /team/… or /datasets/<name>/… of a dataset "
        "named in datasets (GPUPAAS_MODEL_PATH in the server's environment).",
    )
    model_uri = serializers.JSONField(
        required=False,
        help_text="Or the model in an object store: s3://, gs://, https:// or hf:// "
        "(GPUPAAS_MODEL_URI).",
    )
    model_secret = serializers.JSONField(
        required=False,
        help_text="A team or personal secret with the store's keys (GPUPAAS_MODEL_<KEY>).",
    )
    scale_metric = serializers.JSONField(
        required=False, help_text="rps (requests per second per replica) or gpu (percent)."
    )
    scale_target = serializers.JSONField(
        required=False, help_text="The metric's target per replica (default 10 rps or 70 %)."
    )
    idle_minutes = serializers.JSONField(
        required=False,
        help_text=f"With min_replicas 0: scale to zero after {rules.IDLE_MINUTES[0]} to "
        f"{rules.IDLE_MINUTES[1]} minutes without calls; the next call wakes it.",
    )


class TopologyAskSerializer(serializers.Serializer):
    level = serializers.CharField(help_text='A configured level, e.g. "rack" or "block".')
    # The API's name for it; DRF's metaclass takes declared fields out of the class, so the
    # Field attribute of the same name is not shadowed at run time.
    required = serializers.BooleanField(  # type: ignore[assignment]
        default=False,
        help_text="Wait until one domain of the level holds every replica (true), or prefer one.",
    )


class WorkloadCreateSerializer(serializers.Serializer):
    """A request for GPUs. ``team`` may be left out by members of exactly one team.

    Only the shape of the JSON is checked here (a number where a number belongs, text where
    text belongs); what the request may be is :mod:`apps.workloads.rules`, the same for the
    portal, the API and the CLI.
    """

    kind = PassThroughChoiceField(choices=rules.SUBMITTABLE_KINDS)
    name = serializers.CharField(
        error_messages={"blank": rules.NAME_MISSING, "required": rules.NAME_MISSING},
        help_text=f"Shown in lists; at most {rules.MAX_NAME_LENGTH} characters.",
    )
    team = serializers.SlugField(required=False, help_text="The team's slug.")
    gpu_class = serializers.CharField(max_length=64, help_text="A GPU class name, e.g. H100-80GB.")
    image = serializers.CharField(max_length=100, help_text="A catalogue image name.")
    gpu_milli = serializers.IntegerField(
        help_text="GPU per replica: 1000 = one GPU, 500 = half.",
        error_messages={"invalid": rules.AMOUNT_NOT_WHOLE},
    )
    replicas = serializers.IntegerField(
        required=False,
        allow_null=True,
        error_messages={"invalid": rules.REPLICAS_NOT_WHOLE},
        help_text=f"Training: nodes, 1 to {rules.MAX_NODES} (default 1). Sweeps: leave out; "
        "one replica per point of the grid.",
    )
    priority_class = PassThroughChoiceField(
        choices=Workload.Priority.choices,
        required=False,
        allow_null=True,
        help_text="Defaults by kind: notebook → development, training → training, sweep → batch. "
        "Members may use their kind's class or a lower one; leads and admins any.",
    )
    command = _words(
        default=list,
        help_text="Training jobs and sweeps: the program and its options. In a sweep, {name} "
        "puts each trial's value of a parameter in (any word, whole or in part; never through a "
        "shell, shell-quoted inside an `sh -c` script); {{ and }} are literal braces; an unknown "
        "name is refused.",
    )
    args = _words(default=list, help_text="Arguments; {name} placeholders as in command.")
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        default=dict,
        help_text=f"At most {rules.MAX_ENV_VARS} variables; names of ASCII letters, digits and "
        "_; the GPU runtime's and the platform's names are reserved.",
    )
    secrets = SecretRefSerializer(
        many=True,
        default=list,
        help_text=f"At most {rules.MAX_SECRET_REFS} references to the team's secrets or your "
        'own, e.g. [{"name": "hf", "env": "HF_TOKEN", "key": "token"}].',
    )
    datasets = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        default=list,
        help_text=f"At most {rules.MAX_DATASET_REFS} of the team's datasets by name, e.g. "
        '["imagenet"]: a volume claim is mounted read-only at /datasets/<name>, an object-store '
        "prefix is named in GPUPAAS_DATASET_<NAME>_URI.",
    )
    max_runtime_seconds = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="From 60 (a minute) to 2592000 (30 days); none: no limit.",
        error_messages={"invalid": rules.RUNTIME_OUT_OF_RANGE},
    )
    idle_timeout_seconds = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Notebooks: from 300 (5 minutes) to 604800 (7 days).",
        error_messages={"invalid": rules.IDLE_TIMEOUT_OUT_OF_RANGE},
    )
    retries = serializers.IntegerField(
        default=0, error_messages={"invalid": rules.RETRIES_OUT_OF_RANGE}
    )
    requeue_on_preemption = serializers.BooleanField(
        default=True,
        help_text="Preempted by a higher class: back in the queue after the grace period, "
        "restarting with the same GPUPAAS_CHECKPOINT_DIR (true), or end there (false).",
        error_messages={"invalid": rules.REQUEUE_NOT_BOOLEAN},
    )
    grid = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField(allow_blank=True)),
        required=False,
        allow_null=True,
        help_text=f"Sweeps: parameter → values; one trial per point of the grid, at most "
        f"{rules.MAX_GRID_POINTS} points.",
    )
    parallelism = serializers.IntegerField(
        required=False,
        allow_null=True,
        error_messages={"invalid": rules.PARALLELISM_INVALID},
        help_text=f"Sweeps: trials that run at once (default {rules.DEFAULT_PARALLELISM}, at "
        "most the points of the grid). Each trial is admitted, charged and preempted on its own.",
    )
    ranges = serializers.DictField(
        child=serializers.ListField(child=serializers.JSONField()),
        required=False,
        allow_null=True,
        help_text="Sweeps, instead of a grid: parameter → [low, high] or [low, high, scale] "
        '(linear, log or int), e.g. {"lr": [1e-5, 1e-3, "log"], "bs": [16, 64, "int"]}.',
    )
    samples = serializers.IntegerField(
        required=False,
        allow_null=True,
        error_messages={"invalid": rules.SAMPLES_INVALID},
        help_text=f"Sweeps with ranges: how many points to draw, 1 to {rules.MAX_GRID_POINTS}.",
    )
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        error_messages={"invalid": rules.SEED_INVALID},
        help_text="Sweeps with ranges: the seed of the draw (recorded; drawn when absent). The "
        "same seed gives the same trials.",
    )

    endpoint = EndpointSettingsSerializer(
        required=False,
        allow_null=True,
        help_text="Inference endpoints: port, health path, replicas, model and scaling.",
    )
    topology = TopologyAskSerializer(
        required=False,
        allow_null=True,
        help_text="Multi-node training: keep the replicas in one topology domain (a rack, a "
        "block, an NVLink domain: SCHEDULING_TOPOLOGY_LEVELS). required true waits until one "
        "domain holds them all; false prefers one and spreads when none can.",
    )

    confirm_preemption = serializers.BooleanField(
        default=False,
        help_text=CONFIRM_PREEMPTION_HELP,
    )

    def request(self) -> WorkloadRequest:
        """The request as the rules read it and ``workload_submit`` takes it (after
        ``is_valid()``); the team, the GPU class and the image are looked up by the view."""
        data = dict(self.validated_data)
        for lookup in ("team", "gpu_class", "image", "confirm_preemption"):
            data.pop(lookup, None)
        return WorkloadRequest.of(**data)


class PreemptionVictimSerializer(serializers.Serializer):
    """A running workload that a request would preempt if submitted now."""

    id = serializers.IntegerField(allow_null=True, help_text="Null: another team's workload.")
    name = serializers.CharField(allow_null=True, help_text="Null: another team's workload.")
    kind = serializers.CharField()
    owner = serializers.CharField(allow_null=True, help_text="Null: another team's workload.")
    team = serializers.CharField(help_text="The team's slug.")
    gpus = serializers.CharField(help_text='What it holds, e.g. "8 GPUs H100-80GB".')
    total_milli = serializers.IntegerField()
    yours = serializers.BooleanField()
    same_team = serializers.BooleanField(
        help_text="Yours or a teammate's: submitting needs confirm_preemption."
    )


class VerdictSerializer(serializers.Serializer):
    """The scheduling cycle's own decision for the request if it were submitted now."""

    outcome = serializers.ChoiceField(
        choices=["starts", "preempts", "waits", "refused"],
        help_text="starts: admitted now on free capacity; preempts: admitted now by preempting "
        "running work (would_preempt); waits: queued; refused: it could never run as asked.",
    )
    headline = serializers.CharField(
        help_text="One line, as the portal shows it: “Starts now on h100-0.”, “Waits: #3, "
        "about 40 min, because …”, “Would preempt: …”."
    )
    reason = serializers.CharField()
    nodes = serializers.ListField(child=serializers.CharField(), help_text="Where it starts.")
    cluster = serializers.CharField(allow_null=True)
    borrowed = serializers.BooleanField(help_text="It would start on borrowed capacity.")
    queue_position = serializers.IntegerField(allow_null=True)
    estimated_start_at = serializers.DateTimeField(allow_null=True)
    estimated_wait_seconds = serializers.IntegerField(allow_null=True)
    advice = serializers.ListField(
        child=serializers.CharField(), help_text="What would start it sooner."
    )
    trials_at_once = serializers.IntegerField(
        allow_null=True,
        help_text="A sweep: its trials that may run at once (its parallelism); null otherwise.",
    )
    trials_started = serializers.IntegerField(
        allow_null=True, help_text="A sweep: how many of those would start now."
    )


class WorkloadCheckSerializer(serializers.Serializer):
    """What a request would be recorded and charged as (the dry run's answer)."""

    valid = serializers.BooleanField(help_text="Always true: an invalid request is a 400.")
    kind = serializers.CharField()
    name = serializers.CharField()
    team = serializers.CharField(help_text="The team's slug.")
    gpu_class = serializers.CharField()
    image = serializers.CharField()
    gpu_milli = serializers.IntegerField(help_text="Per replica.")
    charged_milli = serializers.IntegerField(
        help_text="Per replica, what the cluster grants: whole time slices, the MIG profile, "
        "whole GPUs; never less than gpu_milli."
    )
    replicas = serializers.IntegerField(help_text="A sweep: the points of its grid.")
    total_milli = serializers.IntegerField(
        help_text="What it is charged: replicas × charged_milli."
    )
    parallelism = serializers.IntegerField(
        allow_null=True, help_text="A sweep: its trials that run at once; null otherwise."
    )
    at_once_milli = serializers.IntegerField(
        help_text="What it holds at once, against the team's quota: total_milli, or for a "
        "sweep parallelism × charged_milli (each trial is charged on its own)."
    )
    priority_class = serializers.CharField()
    hourly_cost = serializers.DecimalField(
        max_digits=14,
        decimal_places=2,
        help_text="What it costs per hour while it runs (a sweep: its trials that run at once), "
        "in `currency`.",
    )
    currency = serializers.CharField(help_text="The platform's currency (PLATFORM_CURRENCY).")
    would_preempt = PreemptionVictimSerializer(
        many=True,
        help_text="What the scheduler would preempt to start it now (its dry run; empty: it "
        "starts on free capacity or waits).",
    )
    confirmation_needed = serializers.BooleanField(
        help_text="Some of would_preempt is yours or a teammate's: submit with "
        "confirm_preemption true."
    )
    verdict = VerdictSerializer(
        help_text="Whether it would start now (where), preempt, or wait (position, estimate, "
        "reason), from a dry run of the scheduling cycle on the current state."
    )


class TrialSerializer(serializers.Serializer):
    """One trial of a sweep (orchestration.selectors.TrialRow)."""

    id = serializers.IntegerField(help_text="The trial's own workload id (its logs, events).")
    index = serializers.IntegerField(help_text="Its point of the grid, SWEEP_INDEX.")
    params = serializers.DictField(child=serializers.CharField(), help_text="SWEEP_<NAME> values.")
    command = serializers.ListField(
        child=serializers.CharField(),
        help_text="The command the trial runs: the sweep's, with its values in the {name} "
        "placeholders.",
    )
    args = serializers.ListField(
        child=serializers.CharField(), help_text="Its arguments, resolved the same way."
    )
    state = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    runtime_seconds = serializers.IntegerField(allow_null=True)
    attempts = serializers.IntegerField(
        help_text="Pods it ran (retries and restarts after preemption)."
    )
    last_metrics_line = serializers.CharField(
        allow_null=True,
        help_text="The last log line that reads as metrics (JSON or key=value pairs): while the "
        "trial runs, the latest read from its pod's log (every ORCHESTRATION_TRIAL_METRICS_SECONDS"
        "); once it ended, from its archived log.",
    )
    last_metrics_at = serializers.DateTimeField(
        allow_null=True, help_text="When that line was printed."
    )
    reason = serializers.CharField()


class SweepTrialsSerializer(serializers.Serializer):
    sweep = WorkloadSerializer(help_text="The sweep itself: its own state and reason.")
    parallelism = serializers.IntegerField(allow_null=True, help_text="Trials run at once.")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Trials per state.")
    trials = TrialSerializer(many=True)


class WorkloadListQuerySerializer(serializers.Serializer):
    """Filters of the workload list; several states or kinds may be given comma-separated."""

    state = serializers.CharField(required=False, help_text="e.g. running or queued,pending")
    kind = serializers.CharField(required=False, help_text="e.g. notebook or training,sweep")
    team = serializers.SlugField(required=False)
    owner = serializers.CharField(required=False, help_text="A username, or me.")
    gpu_class = serializers.CharField(required=False)
    priority_class = serializers.ChoiceField(choices=Workload.Priority.choices, required=False)
    search = serializers.CharField(
        required=False,
        max_length=100,
        help_text="Part of the name, the image (name or reference), the command or arguments.",
    )
    created_from = serializers.DateField(
        required=False, help_text="Created on or after this day (UTC), e.g. 2026-03-01."
    )
    created_to = serializers.DateField(
        required=False, help_text="Created on or before this day (UTC), e.g. 2026-03-31."
    )
    sort = serializers.ChoiceField(
        choices=[(key, label) for key, label in SORT_LABELS.items()],
        required=False,
        help_text="-created (newest first, the default), created, name, -name, state or kind.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("created_from"), attrs.get("created_to")
        if start is not None and end is not None and start > end:
            raise serializers.ValidationError(
                {"created_to": ["The last day comes before the first (created_from)."]}
            )
        return attrs

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
            created_from=day_start(f.get("created_from")),
            created_before=day_start(f.get("created_to"), days_after=1),
            sort=f.get("sort") or "-created",
        )


class CancelSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=500, required=False, allow_blank=True)


class CloneSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    confirm_preemption = serializers.BooleanField(default=False, help_text=CONFIRM_PREEMPTION_HELP)


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
