"""The notebook image's Jupyter server defaults (in /opt/venv/etc/jupyter, the environment's
own config directory): every address of the pod, the port of ``$JUPYTER_PORT`` (8888), no
browser. The command line (the platform's base URL, ip and port) overrides them."""

import os

c = get_config()  # noqa: F821 - defined by Jupyter when it loads this file

c.ServerApp.ip = "0.0.0.0"  # noqa: S104 - in its own pod, behind the portal's ingress
c.ServerApp.port = int(os.environ.get("JUPYTER_PORT") or 8888)
c.ServerApp.open_browser = False
# Deleting a file deletes it: a volume mount has no trash to move it to.
c.FileContentsManager.delete_to_trash = False
