"""What would happen to a request submitted now: the scheduling cycle's own answer. Pure.

The cycle is run on the current snapshot with the request added as the newest waiting
workload (:data:`apps.scheduling.core.PREVIEW_ID`). Its decision for the request is the
verdict: it starts now on some nodes, it starts now by preempting running work, it waits
(position, reason, estimate and advice, all from the same cycle's computation), or it can
never run as asked. Every door — the portal's live verdict and the API's ``?dry_run=true`` —
shows this one answer.

A sweep is previewed as the cycle will meet it: not one unit of all its trials, but its trials,
each one replica charged on its own, at most its parallelism of them holding GPUs at once
(``Snapshot.parallelism``). Its verdict is its first trials': they start (how many of those
that may run at once), they wait, or they can never run.
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
    # A sweep: its trials that may run at once (0: not a sweep), and how many start now.
    trials_at_once: int = 0
    trials_started: int = 0

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
            return f"Starts now{self._trials()} on {where}{extra}."
        if self.outcome == PREEMPTS:
            named = victims or f"{len(self.preemptions)} running workload(s)"
            return (
                f"Would preempt: {named}; then starts{self._trials()} on {', '.join(self.nodes)}."
            )
        if self.outcome == WAITS:
            when = duration_words(self.wait_seconds)
            position = f"#{self.position}" if self.position else "in the queue"
            about = f", about {when}" if when else ", no estimate yet"
            return f"Waits: {position}{about}, because {_lower_first(self.reason)}"
        return f"Would be refused: {self.reason}"

    def _trials(self) -> str:
        """A sweep's trials that start: ": 5 of its 5 trials at once" (nothing for others)."""
        if not self.trials_at_once:
            return ""
        return f" ({self.trials_started} of the {self.trials_at_once} trials that run at once)"


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
    snapshot: Snapshot,
    candidate: WaitingWorkload,
    policy: Policy | None = None,
    *,
    parallelism: int | None = None,
) -> Verdict:
    """The cycle's decision for ``candidate`` if it were submitted now (nothing persisted).

    ``parallelism`` given: ``candidate`` is a sweep of ``candidate.replicas`` trials, each
    charged ``candidate.charged_milli`` on its own, at most ``parallelism`` at once; it is
    previewed as those trials (:func:`sweep_probes`), as the cycle admits them."""
    if parallelism is not None:
        probes = sweep_probes(candidate, parallelism, now=snapshot.now)
        caps = {**snapshot.parallelism, PREVIEW_ID: parallelism}
        trial = replace(snapshot, waiting=(*snapshot.waiting, *probes), parallelism=caps)
    else:
        probes = (replace(candidate, id=PREVIEW_ID, submitted_at=snapshot.now),)
        trial = replace(snapshot, waiting=(*snapshot.waiting, *probes))
    ids = {p.id for p in probes}
    result = schedule(trial, policy)
    at_once = min(parallelism, len(probes)) if parallelism is not None else 0
    preemptions = tuple(p for p in result.preemptions if p.by_workload_id in ids)
    admitted = [a for a in result.admissions if a.workload_id in ids]
    if admitted:
        return Verdict(
            outcome=PREEMPTS if preemptions else STARTS,
            reason=admitted[0].reason,
            nodes=tuple(sorted({n for a in admitted for n in a.placement.nodes})),
            cluster=admitted[0].placement.cluster,
            borrowed=any(a.borrowed for a in admitted),
            preemptions=preemptions,
            now=snapshot.now,
            trials_at_once=at_once,
            trials_started=len(admitted),
        )
    for r in result.rejections:
        if r.workload_id in ids:
            return Verdict(
                outcome=REFUSED, reason=r.reason, now=snapshot.now, trials_at_once=at_once
            )
    waits = sorted((w for w in result.waiting if w.workload_id in ids), key=lambda w: w.position)
    if waits:
        w = waits[0]
        return Verdict(
            outcome=WAITS,
            reason=w.reason,
            position=w.position,
            estimated_start=w.estimated_start,
            advice=w.advice,
            now=snapshot.now,
            trials_at_once=at_once,
        )
    return Verdict(WAITS, "It waits for the next scheduling cycle.", now=snapshot.now)


def sweep_probes(
    sweep: WaitingWorkload, parallelism: int, *, now: datetime
) -> tuple[WaitingWorkload, ...]:
    """A sweep of ``sweep.replicas`` trials as the cycle meets it once submitted: one waiting
    unit per trial (one replica each, of the sweep's charge), of sweep :data:`PREVIEW_ID`,
    at most ``parallelism`` of them admitted (the snapshot's cap). Their ids (``PREVIEW_ID``
    down) are no stored workload's."""
    return tuple(
        replace(sweep, id=PREVIEW_ID - i, replicas=1, submitted_at=now, sweep=PREVIEW_ID)
        for i in range(max(1, sweep.replicas))
    )
