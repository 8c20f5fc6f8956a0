"""Pure quota arithmetic: validation of a team's quota and capacity warnings (milli-GPU)."""

from __future__ import annotations

from collections.abc import Iterable


def quota_errors(
    *, guaranteed_milli: int, limit_milli: int, per_user_cap_milli: int | None
) -> dict[str, str]:
    """Field → message for a quota that breaks the rules of DESIGN.md."""
    errors: dict[str, str] = {}
    if guaranteed_milli < 0:
        errors["guaranteed_milli"] = "The guarantee cannot be negative."
    if limit_milli < 0:
        errors["limit_milli"] = "The limit cannot be negative."
    if not errors and limit_milli < guaranteed_milli:
        errors["limit_milli"] = (
            f"The limit ({format_milli(limit_milli)} GPU) must be at least the guarantee "
            f"({format_milli(guaranteed_milli)} GPU)."
        )
    if per_user_cap_milli is not None:
        if per_user_cap_milli <= 0:
            errors["per_user_cap_milli"] = (
                "A per-user cap must be positive; leave it empty for none."
            )
        elif per_user_cap_milli > limit_milli >= 0:
            errors["per_user_cap_milli"] = (
                f"The per-user cap ({format_milli(per_user_cap_milli)} GPU) cannot exceed "
                f"the team's limit ({format_milli(limit_milli)} GPU)."
            )
    return errors


def guarantee_overcommit_warning(
    *, class_name: str, guarantees_milli: Iterable[int], capacity_milli: int
) -> str | None:
    """A warning when the guarantees of all teams exceed the known capacity of a class.

    Unknown capacity (0) gives no warning: a new class has no inventory yet.
    """
    total = sum(guarantees_milli)
    if capacity_milli <= 0 or total <= capacity_milli:
        return None
    return (
        f"Guarantees for {class_name} add up to {format_milli(total)} GPU, more than the "
        f"{format_milli(capacity_milli)} GPU known to exist: not every guarantee can be honoured."
    )


def format_milli(milli: int) -> str:
    """1500 → '1.5', 250 → '0.25', 2000 → '2'."""
    whole, frac = divmod(milli, 1000)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:03d}".rstrip("0")


# --- who borrows from whom ---------------------------------------------------------------------

UNASSIGNED = ""  # the lender of capacity no team is guaranteed


def borrowing(
    *, guaranteed: dict[str, int], used: dict[str, int], capacity_milli: int
) -> list[tuple[str, str, int]]:
    """Who borrows from whom on one GPU class: ``(borrower, lender, milli)`` triples.

    A team borrows what it uses above its guarantee (DESIGN.md). What it borrows runs on
    capacity no team is guaranteed (lender ``UNASSIGNED``) first, then on the unused guarantees
    of other teams, largest first (ties by name): the order in which reclaiming would take it
    back. Borrowers are served largest first. Borrowing beyond both (capacity unknown or
    overcommitted) is attributed to ``UNASSIGNED``, so the triples always add up to what is
    borrowed.
    """
    teams = set(guaranteed) | set(used)
    borrowed = {
        t: used.get(t, 0) - guaranteed.get(t, 0)
        for t in teams
        if used.get(t, 0) > guaranteed.get(t, 0)
    }
    idle = {
        t: guaranteed.get(t, 0) - used.get(t, 0)
        for t in teams
        if guaranteed.get(t, 0) > used.get(t, 0)
    }
    unassigned = max(0, capacity_milli - sum(guaranteed.values()))
    lenders: list[tuple[str, int]] = [(UNASSIGNED, unassigned)] if unassigned else []
    lenders += sorted(idle.items(), key=lambda kv: (-kv[1], kv[0]))
    pairs: dict[tuple[str, str], int] = {}
    position = 0
    for borrower, amount in sorted(borrowed.items(), key=lambda kv: (-kv[1], kv[0])):
        while amount > 0 and position < len(lenders):
            lender, left = lenders[position]
            if lender == borrower or left <= 0:
                position += 1
                continue
            taken = min(amount, left)
            pairs[(borrower, lender)] = pairs.get((borrower, lender), 0) + taken
            lenders[position] = (lender, left - taken)
            amount -= taken
            if left - taken == 0:
                position += 1
        if amount > 0:
            pairs[(borrower, UNASSIGNED)] = pairs.get((borrower, UNASSIGNED), 0) + amount
    return [(b, lender, m) for (b, lender), m in sorted(pairs.items())]


def gpus(milli: int) -> float:
    """Milli-GPU as GPUs (for display): 2500 → 2.5."""
    return milli / 1000
