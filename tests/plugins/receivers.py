"""Where notifications arrive in tests: a real SMTP server process (aiosmtpd, writing a
Maildir) and a real HTTP receiver for webhooks, both on free loopback ports."""

from __future__ import annotations

import json
import mailbox
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.redis_server import free_port


class SmtpServer:
    """``python -m aiosmtpd`` with the Mailbox handler: every message it accepts is a file."""

    def __init__(self, maildir: Path) -> None:
        self.maildir = maildir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "aiosmtpd",
                "-n",
                "-l",
                f"127.0.0.1:{self.port}",
                "-c",
                "aiosmtpd.handlers.Mailbox",
                str(self.maildir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"aiosmtpd did not start on port {self.port}")
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def messages(self) -> list[Message]:
        if not self.maildir.exists():
            return []
        return [m for _, m in mailbox.Maildir(str(self.maildir), create=False).iteritems()]


@pytest.fixture
def smtp_server(tmp_path: Path) -> Iterator[SmtpServer]:
    server = SmtpServer(tmp_path / "maildir")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mail_settings(settings: Any, smtp_server: SmtpServer) -> SmtpServer:
    """Send the platform's e-mail to the test's SMTP server."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = smtp_server.port
    settings.EMAIL_USE_TLS = False
    settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = ""
    settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_TIMEOUT = 5
    settings.NOTIFY_EMAIL_ENABLED = True
    return smtp_server


@dataclass
class WebhookReceiver:
    """Records every POST; answers with the queued statuses first, then 200."""

    url: str
    statuses: list[int] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture
def webhook_receiver() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with receiver.lock:
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                if status == 200:
                    receiver.received.append(json.loads(body))
                    receiver.headers.append(dict(self.headers.items()))
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"try later")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/team"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)
