"""The notebook ingress of the development setup, and a stand-in for Jupyter behind it.

In production every request to a notebook passes ingress-nginx, which first asks the portal's
auth endpoint (``auth-url``) with the original URL and the browser's cookies: on 2xx it
passes the request to Jupyter with the ``Authorization`` header the portal answered (and sets
the cookie the portal set), on 401 it sends the browser to the portal's sign-in
(``auth-signin`` with ``rd``), and anything else is refused. The simulated cluster runs no
containers, so this gateway does the ingress's part on the same terms and answers in place of
Jupyter with a small page that says which notebook it serves, for whom the portal let it
through and whether the portal handed over the notebook's token (never the token itself).

    .venv/bin/python -m deploy.devtools.notebook_gateway --port 8890 \\
        --portal http://127.0.0.1:8000

with the portal started with ``NOTEBOOK_HOST=http://127.0.0.1:8890`` and
``PORTAL_URL=http://127.0.0.1:8000``.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlencode

import httpx


class Gateway(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, *, auth_url: str, signin_url: str) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.auth_url = auth_url
        self.signin_url = signin_url
        self.client = httpx.Client(timeout=10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Gateway

    def do_GET(self) -> None:
        host = self.headers.get("Host", "")
        original = f"http://{host}{self.path}"
        headers = {"X-Original-URL": original, "X-Forwarded-Proto": "http"}
        if cookie := self.headers.get("Cookie"):
            headers["Cookie"] = cookie
        try:
            answer = self.server.client.get(self.server.auth_url, headers=headers)
        except httpx.HTTPError as exc:
            self._page(502, "The portal cannot be reached", f"Asking {self.server.auth_url}: {exc}")
            return
        if answer.status_code == 401:
            self.send_response(302)
            self.send_header("Location", f"{self.server.signin_url}?{urlencode({'rd': original})}")
            self.end_headers()
            return
        if not 200 <= answer.status_code < 300:
            self._page(403, "Not yours", "The portal refused access to this notebook.")
            return
        token = answer.headers.get("Authorization", "")
        cookies = answer.headers.get_list("Set-Cookie")
        body = (
            "<p>This stand-in for JupyterLab answers at <code>"
            f"{html.escape(self.path.split('?')[0])}</code>.</p>"
            "<p id='token-state'>"
            + (
                "The portal handed over this notebook's token."
                if token.startswith("token ")
                else "The portal sent no token."
            )
            + "</p>"
        )
        self._page(200, "Notebook", body, cookies=cookies)

    def _page(self, status: int, title: str, body: str, *, cookies: Any = ()) -> None:
        data = (
            f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{title}</title>"
            f"</head><body><main><h1>{title}</h1>{body}</main></body></html>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def start(port: int, *, portal_url: str, auth_url: str = "") -> tuple[Gateway, threading.Thread]:
    """A gateway on ``port`` (0: any free one) in a thread; ``shutdown()`` it when done."""
    portal = portal_url.rstrip("/")
    gateway = Gateway(
        port,
        auth_url=auth_url or f"{portal}/notebooks/auth/",
        signin_url=f"{portal}/notebooks/signin/",
    )
    thread = threading.Thread(target=gateway.serve_forever, name="notebook-gateway", daemon=True)
    thread.start()
    return gateway, thread


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8890)
    parser.add_argument("--portal", default="http://127.0.0.1:8000")
    args = parser.parse_args()
    gateway = Gateway(
        args.port,
        auth_url=f"{args.portal.rstrip('/')}/notebooks/auth/",
        signin_url=f"{args.portal.rstrip('/')}/notebooks/signin/",
    )
    print(f"notebook gateway on {gateway.url}, asking {gateway.auth_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        gateway.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
