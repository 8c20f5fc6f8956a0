"""CSV files people open in a spreadsheet.

A spreadsheet evaluates a cell whose text starts with ``=``, ``+``, ``-`` or ``@`` (and, in some
of them, a tab, a carriage return or a NUL before one) as a formula: a team named
``=HYPERLINK(…)`` in an export becomes a link, or worse, on the machine of whoever opens it
(CWE-1236, "CSV injection"). OWASP's guidance: prefix such a cell with a single quote, which
the spreadsheet shows as text, and quote every field (RFC 4180), so that separators and quotes
inside a name never move a column.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any, Protocol

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\0")


class _Writable(Protocol):
    def write(self, text: str, /) -> Any: ...


def safe_cell(value: str) -> str:
    """``value`` as text a spreadsheet shows and never evaluates."""
    return f"'{value}" if value.startswith(FORMULA_STARTS) else value


class SafeWriter:
    """A CSV writer for exports: every field quoted; text cells (``str``) that a spreadsheet
    would evaluate are prefixed with a quote. Numbers the export formats itself are passed as
    ``int``, ``float`` or ``Decimal`` and written as they are."""

    def __init__(self, out: _Writable) -> None:
        self._writer = csv.writer(out, quoting=csv.QUOTE_ALL)

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([safe_cell(c) if isinstance(c, str) else c for c in row])
