"""Pure quota arithmetic: validation of a team's quota and capacity warnings (milli-GPU)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation


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


# --- quota requests and grants ------------------------------------------------------------

KIND_TEAM = "team"  # more guarantee and limit for the whole team: platform admins decide
KIND_USER = "user"  # a higher per-user cap for the person asking: the team's leads decide
KINDS = (KIND_TEAM, KIND_USER)
JUSTIFICATION_MAX = 2000


@dataclass(frozen=True)
class Grant:
    """An approved extra for a period ``[start, end)``, in milli-GPU.

    Team-wide (``user`` None): the team's guarantee and limit of the class both grow by
    ``amount_milli``. For one member (``user`` a username): that member's per-user cap grows,
    never beyond the team's limit."""

    team: str
    gpu_class: str
    amount_milli: int
    start: datetime
    end: datetime
    user: str | None = None

    def active(self, now: datetime) -> bool:
        return self.start <= now < self.end


@dataclass(frozen=True)
class QuotaNumbers:
    guaranteed_milli: int
    limit_milli: int
    per_user_cap_milli: int | None = None


def with_grants(
    base: QuotaNumbers,
    grants: Iterable[Grant],
    *,
    team: str,
    gpu_class: str,
    now: datetime,
    user: str | None = None,
) -> QuotaNumbers:
    """The quota in effect at ``now``: the base plus the grants of (team, class) active then.

    ``user`` names whose per-user cap is asked for; without it the team's base cap is kept."""
    active = [g for g in grants if g.team == team and g.gpu_class == gpu_class and g.active(now)]
    extra = sum(g.amount_milli for g in active if g.user is None)
    limit = base.limit_milli + extra
    cap = base.per_user_cap_milli
    if cap is not None and user is not None:
        cap = min(limit, cap + sum(g.amount_milli for g in active if g.user == user))
    return QuotaNumbers(base.guaranteed_milli + extra, limit, cap)


def parse_gpus(text: str) -> int | None:
    """'2' → 2000, '0.5' → 500, '1.25' → 1250; None if not a positive amount of at most
    three decimals."""
    try:
        value = Decimal(text.strip())
    except (InvalidOperation, AttributeError):
        return None
    if not value.is_finite() or value <= 0 or value > 1_000_000:
        return None
    milli = value * 1000
    if milli != milli.to_integral_value():
        return None
    return int(milli)


def grant_request_errors(
    *,
    kind: str,
    amount_milli: int,
    start: datetime,
    end: datetime,
    now: datetime,
    justification: str,
    max_days: int,
    base: QuotaNumbers | None,
) -> dict[str, str]:
    """Field → message for a quota request that cannot be made as asked."""
    errors: dict[str, str] = {}
    if kind not in KINDS:
        errors["kind"] = f"Ask for one of: {', '.join(KINDS)}."
    if amount_milli <= 0:
        errors["amount"] = "Ask for a positive number of GPUs."
    if end <= start:
        errors["ends_at"] = "The end must be after the start."
    elif end - start > timedelta(days=max_days):
        errors["ends_at"] = f"A grant lasts at most {max_days} days; ask again after it ends."
    if end <= now:
        errors.setdefault("ends_at", "The end is in the past.")
    if not justification.strip():
        errors["justification"] = "Say why you need it: whoever decides reads this."
    elif len(justification) > JUSTIFICATION_MAX:
        errors["justification"] = f"At most {JUSTIFICATION_MAX} characters."
    if base is None:
        errors.setdefault("gpu_class", "Your team has no quota for this class; ask an admin.")
    elif kind == KIND_USER and not errors.get("amount"):
        if base.per_user_cap_milli is None:
            errors["kind"] = (
                "Your team has no per-user cap for this class: you may already use its whole "
                "quota. Ask for more for the team instead."
            )
        elif base.per_user_cap_milli + amount_milli > base.limit_milli:
            errors["amount"] = (
                f"A per-user cap of {format_milli(base.per_user_cap_milli + amount_milli)} GPU "
                f"would exceed the team's limit of {format_milli(base.limit_milli)} GPU; ask "
                "for more for the team instead."
            )
    return errors


def may_decide(*, kind: str, is_admin: bool, leads_team: bool) -> bool:
    """Leads decide per-user caps within the team's quota; platform admins decide team
    quotas (and may decide anything)."""
    if is_admin:
        return True
    return kind == KIND_USER and leads_team
