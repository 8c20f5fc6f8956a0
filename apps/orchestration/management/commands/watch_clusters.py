"""Follow every enabled cluster through watch streams until SIGTERM or Ctrl-C.

Run one such process beside the Celery workers when ``ORCHESTRATION_WATCH`` is on; the
periodic status and inventory passes of beat then serve as a slow safety net.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.orchestration.selectors import enabled_clusters
from apps.orchestration.watch import run_watches


class Command(BaseCommand):
    help = "Follow pods, Jobs and GPU nodes of every enabled cluster through watch streams."

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        clusters = list(enabled_clusters())
        if not clusters:
            self.stderr.write("No enabled cluster to watch.")
            return
        self.stdout.write(f"Watching {', '.join(c.name for c in clusters)}.")
        run_watches(stop, clusters=clusters, watch_seconds=settings.ORCHESTRATION_WATCH_SECONDS)
