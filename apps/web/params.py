"""Values the portal reads from URLs, parsed one way (``apps.common.parsing``): ASCII digits
only, bounded numbers, months the calendar holds. A bad value gives the page back with a
message (status 400), never a 500."""

from __future__ import annotations

import re

from django.http import HttpRequest

from apps.common.parsing import parse_int, parse_month

_SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")


def query_month(request: HttpRequest, name: str = "month") -> tuple[str | None, str]:
    """(``YYYY-MM`` or None for "this month", an error message or ""). On error the month is
    None, so the page shows this month beside the message."""
    raw = request.GET.get(name) or ""
    if not raw:
        return None, ""
    try:
        first = parse_month(raw)
    except ValueError as exc:
        return None, str(exc)
    return f"{first.year:04d}-{first.month:02d}", ""


def query_slug(request: HttpRequest, name: str) -> tuple[str, str]:
    """(a slug from the URL or "" when absent, an error message or ""). Anything that is not
    a slug (letters, digits, - and _) cannot name an object; it gives the message, and ""."""
    raw = request.GET.get(name) or ""
    if not raw:
        return "", ""
    if not _SLUG.fullmatch(raw):
        return "", f"There is no {name} {raw[:40]!r}."
    return raw, ""


def path_int(value: object, *, minimum: int = 1, maximum: int = 2**63 - 1) -> int | None:
    """An id from a URL or form field as a number, or None when it is not one."""
    try:
        return parse_int(str(value), minimum=minimum, maximum=maximum)
    except ValueError:
        return None
