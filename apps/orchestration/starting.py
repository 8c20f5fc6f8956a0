"""Whether a cluster is still being brought up, as its provisioning tool says.

A tool that brings a cluster up on this machine (the development cluster's ``python -m
deploy.devtools.kubesim up``) writes a file named ``STARTING`` beside the kubeconfig it will
write: JSON with its ``pid`` and the ``step`` it is at ("building the cluster: 40% of
packages, about 3 min left"). The cluster is starting while that file is there, the process
lives and the tool has not yet written ``READY`` beside it. A stale file (the process is gone)
or a cluster that is READY counts as not starting; a kubeconfig of a cluster that no tool
brings up has no such file. Reading it costs a stat or two, so the portal asks before every
connection and says "the cluster is starting" at once instead of waiting on a server that is
not there yet.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MARKER = "STARTING"
READY = "READY"
DEFAULT_STEP = "starting"


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def starting_step(kubeconfig_path: str | os.PathLike[str]) -> str | None:
    """What the cluster of this kubeconfig is doing while it starts, or None when it is not
    starting (no marker, a stale one, or the cluster is READY)."""
    folder = Path(kubeconfig_path).parent
    try:
        text = (folder / MARKER).read_text()
    except OSError:
        return None
    if (folder / READY).exists():
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    try:
        pid = int(info.get("pid") or 0)
    except (TypeError, ValueError):
        return None
    if not _alive(pid):
        return None
    step = str(info.get("step") or "").strip()
    return step[:200] or DEFAULT_STEP
