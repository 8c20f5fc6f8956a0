"""Importing Typer and httpx without the packages they only import for extras.

Typer 0.16 imports Rich (with Rich's Markdown renderer and markdown-it) as soon as it is
imported itself, whenever Rich is installed, and Rich comes with Typer; httpx imports its own
command-line tool, and with it Pygments' lexers and Rich, whenever they are installed. Both
fall back when such an import fails: Typer formats help and usage errors with Click's plain
formatter, httpx leaves its command-line tool out. The client prints plain text and needs
none of them, and they were most of the time ``gpupaas --help`` took (see bench/README.md), so
:func:`hidden` makes those imports fail while Typer or httpx is imported. A package that was
imported already stays as it is (a program that embeds the CLI, the tests).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def hidden(*names: str) -> Iterator[None]:
    """Within the block, ``import NAME`` (or of a module of NAME) raises ImportError for each
    of ``names`` not imported yet; afterwards they import normally again."""
    absent = [name for name in names if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]  # None: the import fails
    try:
        yield
    finally:
        for name in absent:
            if sys.modules.get(name) is None:
                sys.modules.pop(name, None)
