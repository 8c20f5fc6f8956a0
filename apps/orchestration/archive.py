"""What the log and event archive decides, as plain functions: which replica a pod runs, how
much of a log is kept (its end, within a byte cap), how events read in several passes merge,
and how an archived log is named and introduced. Pure: no ORM, no HTTP.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from apps.orchestration import manifests as m

# Where Kubernetes says which replica a pod is: an Indexed Job's completion index (annotation,
# and label since 1.28), a StatefulSet's ordinal; a sweep's trial is its point label.
ANNOTATION_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
LABEL_POD_INDEX = "apps.kubernetes.io/pod-index"
# The shortest line the kubelet returns with timestamps: "2006-01-02T15:04:05Z " + "\n"
# (RFC 3339 with its trailing zeros trimmed). So many lines always hold at least the cap.
SHORTEST_LINE_BYTES = 22


def replica_of(pod: Mapping[str, Any]) -> int:
    """The replica a pod runs (0 for single-replica workloads)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    for value in (
        annotations.get(ANNOTATION_COMPLETION_INDEX),
        labels.get(ANNOTATION_COMPLETION_INDEX),
        labels.get(m.LABEL_SWEEP_POINT),
        labels.get(LABEL_POD_INDEX),
    ):
        if value is not None and str(value).isdigit():
            return int(value)
    return 0


def lines_for_cap(max_bytes: int) -> int:
    """How many lines to ask the cluster for so that their end holds ``max_bytes`` of log: the
    API server can tail by lines only, and every timestamped line is at least
    :data:`SHORTEST_LINE_BYTES` long."""
    return max_bytes // SHORTEST_LINE_BYTES + 1


@dataclass(frozen=True)
class CappedLog:
    """The end of a log within a byte cap; ``truncated`` when earlier output was dropped."""

    text: str
    truncated: bool

    @property
    def bytes(self) -> int:
        return len(self.text.encode("utf-8"))


def keep_tail(lines: Iterable[str], *, max_bytes: int, asked_lines: int | None = None) -> CappedLog:
    """The last ``max_bytes`` (UTF-8) of a log given line by line: whole lines where they fit,
    the end of a single line that alone is longer. Memory stays within the cap however long
    the log is. ``asked_lines``: the tail length asked of the cluster; getting that many lines
    means earlier ones may exist, so the result says it is truncated."""
    if max_bytes < 1:
        raise ValueError("max_bytes must be positive.")
    kept: deque[bytes] = deque()
    size = 0
    count = 0
    truncated = False
    for line in lines:
        count += 1
        data = (line + "\n").encode("utf-8", "replace")
        kept.append(data)
        size += len(data)
        while size > max_bytes and len(kept) > 1:
            size -= len(kept.popleft())
            truncated = True
        if size > max_bytes:
            # One line longer than the cap: keep its end, on a character boundary.
            end = kept[0][size - max_bytes :].decode("utf-8", "ignore").encode("utf-8")
            kept[0] = end
            size = len(end)
            truncated = True
    if asked_lines is not None and count >= asked_lines:
        truncated = True
    return CappedLog(b"".join(kept).decode("utf-8", "replace"), truncated)


def size_label(size: int) -> str:
    """1048576 → "1 MiB", 1536 → "1.5 KiB", 300 → "300 bytes"."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def truncation_notice(kept_bytes: int) -> str:
    """The line that opens an archived log whose beginning was not kept."""
    return (
        f"[gpupaas] earlier output was not kept: the archive holds the last "
        f"{size_label(kept_bytes)} of this log."
    )


def log_filename(workload_id: int, replica: int, attempt: int | None = None) -> str:
    """A download's file name: only digits from the request, so it is always safe."""
    suffix = f"-attempt-{int(attempt)}" if attempt and int(attempt) > 1 else ""
    return f"workload-{int(workload_id)}-replica-{int(replica)}{suffix}.log"


def _event_key(event: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(event.get("object") or ""),
        str(event.get("type") or ""),
        str(event.get("reason") or ""),
        str(event.get("message") or ""),
    )


def merge_events(
    kept: Sequence[Mapping[str, Any]], read: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Events archived before and events read now, each once (the later reading of the same
    event wins: its count and time have grown), oldest first. Times are ISO strings or None."""
    merged: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for event in [*kept, *read]:
        key = _event_key(event)
        known = merged.get(key)
        if known is None or (
            int(event.get("count") or 1),
            str(event.get("time") or ""),
        ) >= (int(known.get("count") or 1), str(known.get("time") or "")):
            merged[key] = dict(event)
    return sorted(merged.values(), key=lambda e: (str(e.get("time") or ""), _event_key(e)))


# A log line's timestamp as the kubelet writes it (RFC 3339, then one space).
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) ")
_PAIR = re.compile(r"^[A-Za-z_][\w./-]*=\S+$")
MAX_METRICS_LINE = 500


def metrics_line(lines: Sequence[str]) -> str | None:
    """The last line of a log that reads as metrics: a JSON object, or only ``key=value`` pairs
    (``loss=0.31 acc=0.92``), timestamp removed and at most 500 characters; None without one.
    A checkpoint report alone (``{"checkpoint": {...}}``, :func:`checkpoint_entry`) is not a
    metrics line: the metrics before it stay the run's metrics."""
    found = metrics_entry(lines)
    return found[0] if found else None


def metrics_entry(lines: Sequence[str]) -> tuple[str, datetime | None] | None:
    """:func:`metrics_line`, and when the line was written (its kubelet timestamp, if any)."""
    for raw in reversed(lines):
        stamp = _TIMESTAMP.match(raw)
        line = raw[stamp.end() :].strip() if stamp else raw.strip()
        if not line:
            continue
        at = _stamp_time(stamp.group(0)) if stamp else None
        if line.startswith("{") and line.endswith("}"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and set(data) != {CHECKPOINT_KEY}:
                return line[:MAX_METRICS_LINE], at
            continue
        words = line.replace(",", " ").split()
        if words and all(_PAIR.match(w) for w in words):
            return line[:MAX_METRICS_LINE], at
    return None


# A program reports a checkpoint it has saved with one JSON line on its log (docs/checkpoints.md):
#   {"checkpoint": {"step": 820, "at": "2026-12-02T08:00:00Z"}}
# "step" and "at" are optional; the object may also ride on a metrics line.
CHECKPOINT_KEY = "checkpoint"


@dataclass(frozen=True)
class CheckpointReport:
    """The last checkpoint a log reports: when it was saved and (if said) at which step."""

    at: datetime
    step: int | None


def checkpoint_entry(lines: Sequence[str], *, now: datetime) -> CheckpointReport | None:
    """The newest checkpoint reported in ``lines`` (with kubelet timestamps), None without one.

    Its time is the line's kubelet timestamp: when the program said so, by the node's clock. An
    ``at`` of its own counts only when earlier (a checkpoint reported after it was saved), never
    later, so a program cannot claim a checkpoint newer than its line; nothing is later than
    ``now``. Without a timestamp: ``at``, else ``now``."""
    for raw in reversed(lines):
        stamp = _TIMESTAMP.match(raw)
        line = raw[stamp.end() :].strip() if stamp else raw.strip()
        if not (line.startswith("{") and line.endswith("}") and CHECKPOINT_KEY in line):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        report = data.get(CHECKPOINT_KEY) if isinstance(data, dict) else None
        if not isinstance(report, dict):
            continue
        step = report.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < 2**63:
            step = None
        said = _iso_time(report.get("at"))
        written = _stamp_time(stamp.group(0)) if stamp else None
        at = min(t for t in (said, written, now) if t is not None)
        return CheckpointReport(at=at, step=step)
    return None


def _iso_time(value: Any) -> datetime | None:
    """An ISO 8601 time with its zone (``Z`` or an offset); None for anything else."""
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        at = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _stamp_time(stamp: str) -> datetime | None:
    text = stamp.strip().replace("Z", "+00:00")
    head, dot, rest = text.partition(".")
    if dot:  # at most microseconds: the kubelet writes nanoseconds
        digits = len(rest) - len(rest.lstrip("0123456789"))
        text = f"{head}.{rest[: min(digits, 6)]}{rest[digits:]}"
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None
