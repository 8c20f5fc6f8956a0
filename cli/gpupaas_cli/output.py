"""How the CLI prints: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in r] for r in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return "\n".join(lines)


def gpus(milli: int | None) -> str:
    """1000 → "1", 500 → "0.5", 2500 → "2.5"."""
    if milli is None:
        return "-"
    text = f"{milli / 1000:.3f}".rstrip("0").rstrip(".")
    return text or "0"


def money(amount: Any, currency: str | None) -> str:
    """An amount with its currency ("9.00 EUR"); the amount alone from a server that names
    none."""
    return f"{amount} {currency}" if currency else str(amount)


def cost_header(title: str, currency: str | None) -> str:
    """A table's cost column, named with the currency of its amounts ("COST (EUR)")."""
    return f"{title} ({currency})" if currency else title


def age(timestamp: str | None, now: datetime | None = None) -> str:
    if not timestamp:
        return "-"
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    seconds = int(((now or datetime.now(UTC)) - moment).total_seconds())
    if seconds < 60:
        return f"{max(seconds, 0)}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def workload_request(w: dict[str, Any]) -> str:
    per = gpus(w.get("gpu_milli"))
    replicas = w.get("replicas") or 1
    params = w.get("params")
    at_once = params.get("parallelism") if isinstance(params, dict) else None
    if w.get("kind") == "sweep" and isinstance(at_once, int) and at_once >= 1:
        # A sweep holds GPUs for the trials that run at once, each charged on its own.
        amount = f"{min(at_once, replicas)} at once×{per} ({replicas} trials)"
        return f"{amount} {w.get('gpu_class', '')}".strip()
    amount = per if replicas == 1 else f"{replicas}×{per}"
    return f"{amount} {w.get('gpu_class', '')}".strip()


def workloads_table(items: Sequence[dict[str, Any]]) -> str:
    return table(
        ["ID", "NAME", "KIND", "STATE", "TEAM", "OWNER", "GPU", "AGE"],
        [
            [
                w["id"],
                w["name"],
                w["kind"],
                w["state"],
                w["team"],
                w["owner"],
                workload_request(w),
                age(w.get("created_at")),
            ]
            for w in items
        ],
    )


def workload_details(w: dict[str, Any]) -> str:
    rows: list[tuple[str, Any]] = [
        ("id", w["id"]),
        ("name", w["name"]),
        ("kind", w["kind"]),
        ("state", w["state"]),
        ("reason", w.get("last_reason") or "-"),
        *([("exit code", w["exit_code"])] if w.get("exit_code") is not None else []),
        ("team", w["team"]),
        ("owner", w["owner"]),
        ("gpu", workload_request(w)),
        ("priority", w.get("priority_class")),
        ("image", w.get("image")),
    ]
    if w.get("queue_position") is not None:
        rows.append(("queue position", w["queue_position"]))
    if w.get("estimated_start_at"):
        rows.append(("estimated start", w["estimated_start_at"]))
    for key in ("created_at", "started_at", "finished_at"):
        if w.get(key):
            rows.append((key.replace("_at", ""), w[key]))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def victim_line(victim: dict[str, Any]) -> str:
    """One workload a request would preempt, as the API lists it in ``would_preempt``."""
    held = victim.get("gpus")
    if victim.get("id") is None:
        return f"a {victim.get('kind')} of {victim.get('team')} on borrowed capacity ({held})"
    whose = "yours" if victim.get("yours") else victim.get("owner")
    if not victim.get("same_team"):
        whose = f"{victim.get('owner')} of {victim.get('team')}, borrowed capacity"
    return f"#{victim.get('id')} {victim.get('kind')} {victim.get('name')!r} ({whose}, {held})"


def dry_run_text(answer: dict[str, Any]) -> str:
    """What POST /api/v1/workloads/validate/ answered, for people."""
    replicas = int(answer.get("replicas") or 1)
    each = f"{replicas} × " if replicas > 1 else ""
    charged = (
        f"Charged: {each}{gpus(answer.get('charged_milli'))} GPU {answer.get('gpu_class')} = "
        f"{gpus(answer.get('total_milli'))} GPU."
    )
    parallelism = answer.get("parallelism")
    if isinstance(parallelism, int) and parallelism >= 1:
        # A sweep: its trials that run at once, each charged on its own.
        charged = (
            f"Charged: {min(parallelism, replicas)} trials at once × "
            f"{gpus(answer.get('charged_milli'))} GPU {answer.get('gpu_class')} = "
            f"{gpus(answer.get('at_once_milli'))} GPU at once ({replicas} trials in all)."
        )
    lines = [
        f"Would be accepted: {answer.get('kind')} {answer.get('name')!r} for team "
        f"{answer.get('team')}, {answer.get('priority_class')} class.",
        charged,
    ]
    victims = answer.get("would_preempt") or []
    if victims:
        lines.append("To start now it would preempt:")
        lines += [f"  {victim_line(v)}" for v in victims]
        if answer.get("confirmation_needed"):
            lines.append("Submitting needs --confirm-preemption.")
    else:
        lines.append("Would preempt: nothing.")
    cost = answer.get("hourly_cost")
    if cost is not None:
        lines.append(f"Cost: {money(cost, answer.get('currency'))} per hour while it runs.")
    verdict = answer.get("verdict")
    if isinstance(verdict, dict) and verdict.get("headline"):
        lines.append(f"If submitted now: {verdict['headline']}")
        lines += [f"  Tip: {tip}" for tip in verdict.get("advice") or [] if isinstance(tip, str)]
    return "\n".join(lines)


def image_clusters(image: dict[str, Any]) -> str:
    """Where an image of ``GET /api/v1/images/`` is: ``onprem (3 nodes), burst: unknown``."""
    words = []
    for c in image.get("availability") or []:
        if c.get("status") == "available":
            words.append(
                f"{c['cluster']} ({c.get('nodes')} node{'s' if c.get('nodes') != 1 else ''})"
            )
        elif c.get("status") == "missing":
            words.append(f"{c['cluster']}: not there")
        else:
            words.append(f"{c['cluster']}: unknown")
    return ", ".join(words) or "-"
