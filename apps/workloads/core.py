"""Pure vocabulary of workloads: kinds, states, legal transitions and priority classes (their
one home). What a request may be is :mod:`apps.workloads.rules`."""

from __future__ import annotations

import itertools
import math
import posixpath
import random
import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta

KIND_NOTEBOOK = "notebook"
KIND_TRAINING = "training"
KIND_SWEEP = "sweep"
KIND_INFERENCE = "inference"

PENDING = "pending"
QUEUED = "queued"
ADMITTED = "admitted"
STARTING = "starting"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
PREEMPTED = "preempted"
SUSPENDED = "suspended"
EXPIRED = "expired"

TERMINAL_STATES = frozenset({SUCCEEDED, FAILED, CANCELLED, EXPIRED})
ACTIVE_STATES = frozenset({ADMITTED, STARTING, RUNNING})
WAITING_STATES = frozenset({PENDING, QUEUED})

# DESIGN.md: pending → queued → admitted → starting → running → succeeded | failed | cancelled,
# plus preempted (back to queued unless the user said otherwise), suspended (notebooks,
# resumable) and expired (max runtime reached). Any live state may fail or be cancelled. A
# retry after a failure is no preemption: a job's Job starts the program again (running →
# starting), a gang goes straight back to the queue (starting | running → queued).
TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({QUEUED, FAILED, CANCELLED}),
    QUEUED: frozenset({ADMITTED, FAILED, CANCELLED}),
    ADMITTED: frozenset({STARTING, RUNNING, QUEUED, PREEMPTED, FAILED, CANCELLED}),
    STARTING: frozenset(
        {RUNNING, SUCCEEDED, PREEMPTED, FAILED, CANCELLED, EXPIRED, SUSPENDED, QUEUED}
    ),
    RUNNING: frozenset(
        {SUCCEEDED, FAILED, CANCELLED, PREEMPTED, SUSPENDED, EXPIRED, STARTING, QUEUED}
    ),
    PREEMPTED: frozenset({QUEUED, FAILED, CANCELLED}),
    SUSPENDED: frozenset({QUEUED, CANCELLED, FAILED}),
    SUCCEEDED: frozenset(),
    FAILED: frozenset(),
    CANCELLED: frozenset(),
    EXPIRED: frozenset(),
}


class TransitionError(ValueError):
    pass


def check_transition(current: str, target: str) -> None:
    if target not in TRANSITIONS.get(current, frozenset()):
        raise TransitionError(f"A workload that is {current} cannot become {target}.")


# The one vocabulary of priority classes (the scheduler, the manifests and the request rules
# all read it from here).
PRIORITY_PRODUCTION = "production"
PRIORITY_TRAINING = "training"
PRIORITY_DEVELOPMENT = "development"
PRIORITY_BATCH = "batch"
# Highest first; DESIGN.md's table of who preempts whom follows from this order.
PRIORITY_ORDER: tuple[str, ...] = (
    PRIORITY_PRODUCTION,
    PRIORITY_TRAINING,
    PRIORITY_DEVELOPMENT,
    PRIORITY_BATCH,
)

# Seconds a preempted pod of each class gets to checkpoint before it is killed: its
# terminationGracePeriodSeconds, the time the scheduler waits before requeueing it, and the
# number its preemption message names. Settings may set one number for every class
# (SCHEDULING_PREEMPTION_GRACE_SECONDS); apps.workloads.selectors.preemption_grace_seconds
# applies it.
PREEMPTION_GRACE_SECONDS: dict[str, int] = {
    PRIORITY_PRODUCTION: 60,
    PRIORITY_TRAINING: 120,
    PRIORITY_DEVELOPMENT: 30,
    PRIORITY_BATCH: 30,
}


def grace_seconds_for(priority: str, override: int | None = None) -> int:
    """The grace period of ``priority`` (the longest one for an unknown class)."""
    if override is not None:
        return override
    return PREEMPTION_GRACE_SECONDS.get(priority, max(PREEMPTION_GRACE_SECONDS.values()))


# The class a kind runs in unless asked otherwise; for members also the highest they may use.
DEFAULT_PRIORITY = {
    KIND_NOTEBOOK: PRIORITY_DEVELOPMENT,
    KIND_TRAINING: PRIORITY_TRAINING,
    KIND_SWEEP: PRIORITY_BATCH,
    KIND_INFERENCE: PRIORITY_PRODUCTION,
}


def priority_rank(priority: str) -> int:
    """0 for production … 3 for batch; unknown classes sort last."""
    try:
        return PRIORITY_ORDER.index(priority)
    except ValueError:
        return len(PRIORITY_ORDER)


def may_preempt(attacker: str, victim: str) -> bool:
    """Within a team: a strictly higher class preempts a lower one; production never yields."""
    if victim == PRIORITY_PRODUCTION:
        return False
    return priority_rank(attacker) < priority_rank(victim)


def allowed_priorities(
    kind: str | None = None, *, is_lead: bool, is_admin: bool
) -> tuple[str, ...]:
    """The priority classes a person may use for a kind, highest first (DESIGN.md "Governance").

    Members run a kind in its own class or a lower one: notebooks in development, training
    jobs in training, sweeps in batch. Team leads and platform admins may use every class,
    production (live traffic) included. Without a kind: the most a member may use for any.
    """
    if is_lead or is_admin:
        return PRIORITY_ORDER
    ceiling = DEFAULT_PRIORITY.get(kind or "", PRIORITY_TRAINING)
    rank = max(priority_rank(ceiling), priority_rank(PRIORITY_TRAINING))
    return PRIORITY_ORDER[rank:]


def state_timestamp_field(state: str) -> str | None:
    """The Workload timestamp that records reaching ``state`` first."""
    return {
        QUEUED: "queued_at",
        ADMITTED: "admitted_at",
        RUNNING: "started_at",
        SUCCEEDED: "finished_at",
        FAILED: "finished_at",
        CANCELLED: "finished_at",
        EXPIRED: "finished_at",
    }.get(state)


# --- sweeps: a grid of trials, and the sweep's own state derived from theirs ---------------------


def sweep_points(grid: Mapping[str, Sequence[str]]) -> list[dict[str, str]]:
    """The cartesian product of a parameter grid, in a stable order: trial i runs point i."""
    keys = sorted(grid)
    return [
        dict(zip(keys, (str(v) for v in values), strict=True))
        for values in itertools.product(*(list(grid[k]) for k in keys))
    ]


def sweep_points_of(params: Mapping[str, object]) -> list[dict[str, str]]:
    """The points of a recorded sweep: its sampled ranges, else its grid."""
    ranges, samples, seed = params.get("ranges"), params.get("samples"), params.get("seed")
    if isinstance(ranges, Mapping) and isinstance(samples, int) and isinstance(seed, int):
        return sample_points(ranges, samples, seed)
    grid = params.get("grid")
    return sweep_points(grid) if isinstance(grid, Mapping) else []


def sweep_state(trial_states: Iterable[str]) -> tuple[str, str]:
    """A sweep's state and reason from its trials' states.

    Queued until a trial has been admitted; running while any trial is admitted or runs, or
    some are done and others wait; when all are done: failed if any failed (how many), else
    cancelled if any was cancelled, else succeeded.
    """
    counts = Counter(trial_states)
    total = sum(counts.values())
    done = sum(counts[s] for s in TERMINAL_STATES)
    if total and done == total:
        failed = counts[FAILED] + counts[EXPIRED]
        if failed:
            return FAILED, f"{failed} of {total} trials failed; {counts[SUCCEEDED]} succeeded."
        if counts[CANCELLED]:
            return CANCELLED, f"{counts[CANCELLED]} of {total} trials were cancelled."
        return SUCCEEDED, f"All {total} trials succeeded."
    active = sum(counts[s] for s in ACTIVE_STATES)
    waiting = sum(counts[s] for s in WAITING_STATES) + counts[PREEMPTED]
    if active or done:
        return RUNNING, f"{active} of {total} trials running, {done} done, {waiting} waiting."
    return QUEUED, f"{total} trials waiting for GPUs."


# --- sweeps: {name} placeholders in a trial's command and arguments -----------------------------

# A placeholder names a parameter of the sweep (the grid's or the ranges'): ``{lr}``; ``{{`` and
# ``}}`` are literal braces. Each trial's command and arguments are its own argv with the values
# put in, word by word: no shell reads them, so a value is never parsed as shell syntax — except
# inside the script of ``sh -c`` (bash, dash, …), where each value is put in shell-quoted, one
# word of the script whatever it holds.
PLACEHOLDER_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_PLACEHOLDER_TOKEN = re.compile(r"\{\{|\}\}|\{(" + PLACEHOLDER_NAME + r")\}|[{}]")
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh", "mksh", "busybox"})


class PlaceholderError(ValueError):
    """A word with a brace that is neither a placeholder nor an escaped brace."""

    def __init__(self, word: str, brace: str) -> None:
        self.word, self.brace = word, brace
        twice = "{{" if brace == "{" else "}}"
        super().__init__(
            f"“{word}” has a lone “{brace}”: write {{name}} for a parameter of the sweep, "
            f"or {twice} for a literal brace."
        )


def placeholders_in(word: str) -> list[str]:
    """The parameter names ``word`` refers to, in order; PlaceholderError on a lone brace."""
    names = []
    for match in _PLACEHOLDER_TOKEN.finditer(word):
        token = match.group(0)
        if match.group(1) is not None:
            names.append(match.group(1))
        elif token in ("{", "}"):
            raise PlaceholderError(word, token)
    return names


def fill_placeholders(
    word: str, values: Mapping[str, str], quote: Callable[[str], str] | None = None
) -> str:
    """``word`` with each ``{name}`` replaced by ``values[name]`` (through ``quote``, if given)
    and ``{{``/``}}`` by single braces. A name without a value, or a lone brace, raises."""

    def put(match: re.Match[str]) -> str:
        found = match.group(0)
        if found in ("{{", "}}"):
            return found[0]
        name = match.group(1)
        if name is None:
            raise PlaceholderError(word, found)
        value = values[name]
        return quote(value) if quote is not None else value

    return _PLACEHOLDER_TOKEN.sub(put, word)


def shell_script_index(argv: Sequence[str]) -> int | None:
    """Where the script of ``sh -c SCRIPT …`` is in ``argv`` (a shell as the program, ``-c``
    among its options), or None when ``argv`` is no such call."""
    if not argv or posixpath.basename(argv[0]) not in SHELLS:
        return None
    start = 1
    if posixpath.basename(argv[0]) == "busybox":
        if len(argv) < 2 or argv[1] not in SHELLS - {"busybox"}:
            return None
        start = 2
    i, script = start, False
    while i < len(argv):
        word = argv[i]
        if word == "--":
            i += 1
            break
        if word.startswith("--"):
            i += 1  # a long option (--norc, --login)
            continue
        if len(word) > 1 and word[0] in "-+":
            script = script or (word[0] == "-" and "c" in word[1:])
            i += 2 if word in ("-o", "+o") else 1  # -o NAME: its value follows
            continue
        break
    return i if script and i < len(argv) else None


def sweep_argv(
    command: Sequence[str], args: Sequence[str], point: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """A trial's command and arguments: the sweep's, with the point's values in its
    placeholders (checked at submit: every name is a parameter, no lone brace)."""
    argv = [*command, *args]
    script = shell_script_index(argv)
    filled = [
        fill_placeholders(word, point, shlex.quote if i == script else None)
        for i, word in enumerate(argv)
    ]
    return filled[: len(command)], filled[len(command) :]


# Scales of a sampled range: uniform, uniform in the logarithm, uniform whole numbers.
SCALE_LINEAR = "linear"
SCALE_LOG = "log"
SCALE_INT = "int"
SCALES = (SCALE_LINEAR, SCALE_LOG, SCALE_INT)


def sample_points(
    ranges: Mapping[str, Sequence[object]], samples: int, seed: int
) -> list[dict[str, str]]:
    """``samples`` points drawn from ``ranges`` (name → [low, high] or [low, high, scale]) by a
    generator seeded with ``seed``: the same request always gives the same trials. Values are
    text as the trials see them (whole numbers for ``int``, 6 significant digits otherwise)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible sampling, not secrecy
    keys = sorted(ranges)
    points = []
    for _ in range(samples):
        point = {}
        for key in keys:
            spec = list(ranges[key])
            low, high = float(spec[0]), float(spec[1])  # type: ignore[arg-type]
            scale = str(spec[2]) if len(spec) > 2 else SCALE_LINEAR
            if scale == SCALE_INT:
                point[key] = str(rng.randint(math.ceil(low), math.floor(high)))
            elif scale == SCALE_LOG:
                point[key] = f"{math.exp(rng.uniform(math.log(low), math.log(high))):.6g}"
            else:
                point[key] = f"{rng.uniform(low, high):.6g}"
        points.append(point)
    return points


def describe_duration(delta: timedelta) -> str:
    """A run's length for people: "42 s", "3 min", "2 h 5 min", "3 d 4 h"."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
