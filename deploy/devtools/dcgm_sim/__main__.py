"""``python -m deploy.devtools.dcgm_sim``: the exporter process (:mod:`.server`)."""

from __future__ import annotations

import sys

from deploy.devtools.dcgm_sim.server import main

if __name__ == "__main__":
    sys.exit(main())
