#!/usr/bin/env python3
"""Start JupyterLab the way the Jupyter docker-stacks images' ``start-notebook.py`` does:
``jupyter lab`` (or ``$DOCKER_STACKS_JUPYTER_CMD``), then ``$NOTEBOOK_ARGS``, then this
command's own arguments, exec'd so that Jupyter is the container's main process and gets its
SIGTERM. ``JUPYTER_TOKEN`` (by Jupyter) and ``JUPYTER_PORT`` (by the image's
jupyter_server_config.py) are read as in those images.

Jupyter writes its runtime files (the cookie secret, kernel connection files) under
``$JUPYTER_RUNTIME_DIR``, by default /tmp/jupyter-runtime. When $HOME cannot be written (a
read-only root filesystem: the pod then has its own /tmp), the settings, workspaces and caches
that Jupyter, IPython and their libraries keep in $HOME go under /tmp/home instead.
"""

from __future__ import annotations

import os
import shlex
import sys

SCRATCH_HOME = "/tmp/home"  # noqa: S108 - the pod's own /tmp
MOVED_TO_SCRATCH = {
    "XDG_CACHE_HOME": ".cache",
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "JUPYTER_CONFIG_DIR": ".jupyter",
    "JUPYTER_DATA_DIR": ".local/share/jupyter",
    "IPYTHONDIR": ".ipython",
    "MPLCONFIGDIR": ".config/matplotlib",
}


def main() -> None:
    env = os.environ
    env.setdefault("JUPYTER_RUNTIME_DIR", "/tmp/jupyter-runtime")  # noqa: S108
    home = env.get("HOME") or "/home/jovyan"
    if not os.access(home, os.W_OK):
        for name, below in MOVED_TO_SCRATCH.items():
            env.setdefault(name, f"{SCRATCH_HOME}/{below}")
        print(
            f"start-notebook.py: {home} is read-only; settings and caches go under {SCRATCH_HOME}",
            file=sys.stderr,
            flush=True,
        )
    command = ["jupyter", env.get("DOCKER_STACKS_JUPYTER_CMD") or "lab"]
    command += shlex.split(env.get("NOTEBOOK_ARGS", ""))
    command += sys.argv[1:]
    print(f"start-notebook.py: executing {shlex.join(command)}", file=sys.stderr, flush=True)
    os.execvp(command[0], command)  # noqa: S606 - the container's main process, by design


if __name__ == "__main__":
    main()
