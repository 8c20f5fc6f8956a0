"""Parsing of the values people put in URLs and forms: whole numbers and months.

Python's ``int()`` and ``str.isdigit()`` accept far more than the digits 0-9 (``int("١٢")`` is
12, ``"²".isdigit()`` is true but ``int("²")`` raises), and ``date`` arithmetic overflows at
the ends of the calendar. These parsers take ASCII digits only, bound every number, and raise
``ValueError`` with a message fit to show a person; each edge (portal, API) turns that into
its own answer (a page with the message, a 400 with the error shape).
"""

from __future__ import annotations

import re
from datetime import date

_INT = re.compile(r"-?[0-9]{1,18}")  # ASCII only; 18 digits stay inside PostgreSQL's bigint
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")
MONTH_FORMAT_HELP = "Give the month as YYYY-MM, e.g. 2025-01."
# The last month whose following month the calendar still holds (month ranges are [first
# day, first day of the next month)).
LAST_MONTH = date(9999, 11, 1)


def parse_int(text: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """A whole number written with the ASCII digits 0-9 (optionally signed), within bounds."""
    value = text.strip()
    if not _INT.fullmatch(value):
        raise ValueError(f"{text[:40]!r} is not a whole number.")
    number = int(value)
    if minimum is not None and number < minimum:
        raise ValueError(f"{number} is below the smallest allowed value, {minimum}.")
    if maximum is not None and number > maximum:
        raise ValueError(f"{number} is above the largest allowed value, {maximum}.")
    return number


def parse_month(text: str) -> date:
    """The first day of the month ``YYYY-MM`` (years 0001 to 9999; the last is 9999-11)."""
    match = _MONTH.fullmatch(text.strip())
    if match is None:
        raise ValueError(MONTH_FORMAT_HELP)
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        raise ValueError(f"{text.strip()} has no month {month:02d}. {MONTH_FORMAT_HELP}")
    if year < 1:
        raise ValueError(f"{text.strip()} is before the year 1. {MONTH_FORMAT_HELP}")
    first = date(year, month, 1)
    if first > LAST_MONTH:
        raise ValueError(f"{text.strip()} is past the last month the calendar holds, 9999-11.")
    return first
