"""How a command reads on a page: its words as a shell would take them (quoted where needed)."""

from __future__ import annotations

import shlex
from typing import Any

from django import template

register = template.Library()


@register.filter
def command_line(obj: Any) -> str:
    """``obj.command`` and ``obj.args`` (a workload, a sweep's trial row) as one line, each
    word quoted when it holds spaces or shell characters, so that argv items stay apart."""
    words = [*(getattr(obj, "command", None) or []), *(getattr(obj, "args", None) or [])]
    return shlex.join(str(w) for w in words)
