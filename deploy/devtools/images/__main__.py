"""``python -m deploy.devtools.images``: build, list or prune the images (:mod:`.build`)."""

from __future__ import annotations

import sys

from deploy.devtools.images.build import main

if __name__ == "__main__":
    sys.exit(main())
