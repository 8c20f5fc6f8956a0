"""What would happen to a request submitted now: the scheduling cycle's own answer. Pure.

The cycle is run on the current snapshot with the request added as the newest waiting
workload (:data:`apps.scheduling.core.PREVIEW_ID`). Its decision for the request is the
verdict: it starts now on some nodes, it starts now by preempting running work, it waits
(position, reason, estimate and advice, all from the same cycle's computation), or it can
never run as asked. Every door — the portal's live verdict and the API's ``?dry_run=true`` —
shows this one answer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from apps.scheduling.core import PREVIEW_ID, schedule
from apps.scheduling.data import Policy, Preemption, Snapshot, WaitingWorkload

STARTS = "starts"
PREEMPTS = "preempts"
WAITS = "waits"
REFUSED = "refused"
OUTCOMES = (STARTS, PREEMPTS, WAITS, REFUSED)


@dataclass(frozen=True)
class Verdict:
    outcome: str  # one of OUTCOMES
    reason: str
    nodes: tuple[str, ...] = ()
    cluster: str = ""
    borrowed: bool = False
    position: int | None = None
    estimated_start: datetime | None = None
    advice: tuple[str, ...] = ()
    preemptions: tuple[Preemption, ...] = ()
    now: datetime | None = None

    @property
    def wait_seconds(self) -> int | None:
        if self.estimated_start is None or self.now is None:
            return None
        return max(0, int((self.estimated_start - self.now).total_seconds()))

    def headline(self, victims: str = "") -> str:
        """One line: "Starts now on h100-0", "Waits: #3, about 40 min, because …"."""
        if self.outcome == STARTS:
            where = ", ".join(self.nodes)
            extra = " (on borrowed capacity: preemptible)" if self.borrowed else ""
            return f"Starts now on {where}{extra}."
        if self.outcome == PREEMPTS:
            named = victims or f"{len(self.preemptions)} running workload(s)"
            return f"Would preempt: {named}; then starts on {', '.join(self.nodes)}."
        if self.outcome == WAITS:
            when = duration_words(self.wait_seconds)
            position = f"#{self.position}" if self.position else "in the queue"
            about = f", about {when}" if when else ", no estimate yet"
            return f"Waits: {position}{about}, because {_lower_first(self.reason)}"
        return f"Would be refused: {self.reason}"


def duration_words(seconds: int | None) -> str:
    """``2400`` → "40 min", ``5400`` → "1 h 30 min", ``0`` → "under a minute"."""
    if seconds is None:
        return ""
    if seconds < 60:
        return "under a minute"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours >= 48:
        return f"{round(hours / 24)} days"
    return f"{hours} h" + (f" {rest} min" if rest else "")


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def preview(
    snapshot: Snapshot, candidate: WaitingWorkload, policy: Policy | None = None
) -> Verdict:
    """The cycle's decision for ``candidate`` if it were submitted now (nothing persisted)."""
    probe = replace(candidate, id=PREVIEW_ID, submitted_at=snapshot.now)
    result = schedule(replace(snapshot, waiting=(*snapshot.waiting, probe)), policy)
    preemptions = tuple(p for p in result.preemptions if p.by_workload_id == PREVIEW_ID)
    for a in result.admissions:
        if a.workload_id == PREVIEW_ID:
            nodes = a.placement.nodes
            return Verdict(
                outcome=PREEMPTS if preemptions else STARTS,
                reason=a.reason,
                nodes=nodes,
                cluster=a.placement.cluster,
                borrowed=a.borrowed,
                preemptions=preemptions,
                now=snapshot.now,
            )
    for r in result.rejections:
        if r.workload_id == PREVIEW_ID:
            return Verdict(outcome=REFUSED, reason=r.reason, now=snapshot.now)
    for w in result.waiting:
        if w.workload_id == PREVIEW_ID:
            return Verdict(
                outcome=WAITS,
                reason=w.reason,
                position=w.position,
                estimated_start=w.estimated_start,
                advice=w.advice,
                now=snapshot.now,
            )
    return Verdict(WAITS, "It waits for the next scheduling cycle.", now=snapshot.now)
