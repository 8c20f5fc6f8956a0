"""``python -m deploy.devtools.dev_gateway``: the gateway's command line (:mod:`.server`)."""

from __future__ import annotations

import sys

from deploy.devtools.dev_gateway.server import main

if __name__ == "__main__":
    sys.exit(main())
