"""The former name of :mod:`deploy.devtools.dev_gateway`, the ingress of the development setup
(it was a stand-in that answered in place of Jupyter; now it proxies as ingress-nginx does).

    .venv/bin/python -m deploy.devtools.notebook_gateway ...   # the same as dev_gateway
"""

from __future__ import annotations

from deploy.devtools.dev_gateway import Gateway, main, start

__all__ = ["Gateway", "main", "start"]

if __name__ == "__main__":
    raise SystemExit(main())
