"""HTTP/1.1 on sockets: the request targets and hosts the gateway accepts, reading messages
within the limits, framing, bodies and the headers that pass end to end."""

from __future__ import annotations

import http
import http.cookiejar
import re
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

HEAD_LIMIT = 64 * 1024  # request or response line and headers together
MAX_HEADERS = 200
CHUNK = 64 * 1024
NEXT_UPSTREAM_TRIES = 3  # ingress-nginx's proxy-next-upstream-tries


DRAIN_SECONDS = 10.0  # an upgraded connection, one side closed: how long the other may finish

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# What the gateway itself says to the upstream and the portal about a request; a client's own
# values never pass.
FORWARDING = frozenset(
    {
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-port",
        "x-forwarded-proto",
        "x-forwarded-scheme",
        "x-real-ip",
        "x-request-id",
        "x-scheme",
        "x-original-url",
        "x-original-uri",
        "x-original-method",
        "x-sent-from",
        "x-auth-request-redirect",
        "proxy",  # httpoxy
    }
)


# --- request targets -------------------------------------------------------------------------

_PATH_CHARS = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,=:@/%]*")
_QUERY_CHARS = re.compile(r"[!-~]*")
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HIDDEN = re.compile(r"%(?:2e|2f|5c|00)", re.IGNORECASE)


def target_refusal(target: str) -> str:
    """Why a request target is refused before any routing or auth ('' when it is not): only
    normalised absolute paths pass, so what the portal authorises (the path as sent) is what
    the upstream serves — no proxy or server on the way can resolve ``..`` or decode a hidden
    slash into another notebook's path."""
    path, _, query = target.partition("?")
    if not path.startswith("/"):
        return "The request target is not an absolute path."
    if not _PATH_CHARS.fullmatch(path):
        return "The path holds a character a path may not hold here (such as ';' or '\\')."
    if not _QUERY_CHARS.fullmatch(query) or "#" in query:
        return "The query holds a character a query may not hold."
    if _BAD_ESCAPE.search(target):
        return "The request target holds a malformed percent-escape."
    if _HIDDEN.search(path):
        return "The path hides a dot, slash, backslash or NUL in a percent-escape."
    if "//" in path:
        return "The path holds an empty segment ('//')."
    if any(segment in {".", ".."} for segment in path.split("/")):
        return "The path holds a '.' or '..' segment."
    return ""


def split_host(value: str) -> str:
    """The host of a Host header, lower case, without the port."""
    value = value.strip().lower()
    if value.startswith("["):
        return value.partition("]")[0] + "]"
    return value.rpartition(":")[0] if value.count(":") == 1 else value


_HOST = re.compile(
    r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
)


def _valid_host(value: str) -> bool:
    """A Host header: a DNS name or IPv4 address, or a bracketed IPv6 one, with a port or not."""
    value = value.lower()
    if value.startswith("["):
        address, _, rest = value[1:].partition("]")
        return bool(re.fullmatch(r"[0-9a-f:.]+", address)) and (
            not rest or bool(re.fullmatch(r":\d{1,5}", rest))
        )
    host, colon, port = value.partition(":")
    return bool(_HOST.fullmatch(host)) and (not colon or bool(re.fullmatch(r"\d{1,5}", port)))


class _Malformed(Exception):
    """A message that is not HTTP/1.1 as the gateway accepts it (status: what to answer)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class _Reader:
    """Buffered reads from a socket, with what is buffered at hand for a spliced connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(CHUNK)
        self.buf += data
        return bool(data)

    def readline(self, limit: int) -> bytes:
        """A line with its end (b"" at the end of the stream; what is left without an end)."""
        while True:
            end = self.buf.find(b"\n")
            if end >= 0:
                line = bytes(self.buf[: end + 1])
                del self.buf[: end + 1]
                return line
            if len(self.buf) > limit:
                raise _Malformed("A line of the message is too long.", 431)
            if not self._fill():
                line = bytes(self.buf)
                self.buf.clear()
                return line

    def read_some(self, most: int) -> bytes:
        if not self.buf and not self._fill():
            return b""
        data = bytes(self.buf[:most])
        del self.buf[:most]
        return data

    def take_buffered(self) -> bytes:
        data = bytes(self.buf)
        self.buf.clear()
        return data


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


@dataclass
class _Message:
    """A request or response head: the start line's three parts and the headers in order."""

    start: tuple[str, str, str]
    headers: list[tuple[str, str]]

    def all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for n, v in self.headers if n.lower() == name]

    def get(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if values else None

    def tokens(self, name: str) -> set[str]:
        return {t.strip().lower() for v in self.all(name) for t in v.split(",") if t.strip()}


def _read_message(reader: _Reader, *, request: bool) -> _Message | None:
    """The next message head, or None at a clean end of the stream before one."""
    line = reader.readline(HEAD_LIMIT)
    while line in {b"\r\n", b"\n"} and request:  # RFC 9112 2.2: empty lines before a request
        line = reader.readline(HEAD_LIMIT)
    if not line:
        return None
    if not line.endswith(b"\n"):
        raise _Malformed("The message ended inside its first line.")
    try:
        text = line.decode("ascii").rstrip("\r\n")
    except UnicodeDecodeError:
        raise _Malformed("The first line is not ASCII.") from None
    parts = text.split(" ", 2)
    if request:
        if len(parts) != 3 or not _TOKEN.fullmatch(parts[0]) or not parts[1]:
            raise _Malformed("The request line is not METHOD TARGET VERSION.")
        if not re.fullmatch(r"HTTP/1\.[01]", parts[2]):
            raise _Malformed("Only HTTP/1.0 and HTTP/1.1 are served.", 505)
        start = (parts[0], parts[1], parts[2])
    else:
        if (
            len(parts) < 2
            or not re.fullmatch(r"HTTP/1\.[01]", parts[0])
            or not re.fullmatch(r"\d{3}", parts[1])
        ):
            raise _Malformed("The status line is not VERSION CODE REASON.")
        start = (parts[0], parts[1], parts[2] if len(parts) == 3 else "")
    headers: list[tuple[str, str]] = []
    size = len(line)
    while True:
        line = reader.readline(HEAD_LIMIT)
        size += len(line)
        if size > HEAD_LIMIT or len(headers) > MAX_HEADERS:
            raise _Malformed("The message's headers are too large.", 431)
        if not line.endswith(b"\n"):
            raise _Malformed("The message ended inside its headers.")
        if line in {b"\r\n", b"\n"}:
            return _Message(start, headers)
        if line[:1] in {b" ", b"\t"}:
            raise _Malformed("Folded header lines are not accepted.")
        try:
            text = line.decode("latin-1").rstrip("\r\n")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
            raise _Malformed("A header is not text.") from None
        name, colon, value = text.partition(":")
        if not colon or not _TOKEN.fullmatch(name):
            raise _Malformed(f"{name[:40]!r} is no header name.")
        if any(c in value for c in "\r\n\x00"):
            raise _Malformed("A header value holds a control character.")
        headers.append((name, value.strip(" \t")))


@dataclass(frozen=True)
class _Framing:
    kind: str  # "none" | "length" | "chunked" | "close"
    length: int = 0


def _request_framing(request: _Message) -> _Framing:
    encodings = request.all("Transfer-Encoding")
    lengths = request.all("Content-Length")
    if encodings:
        if lengths:
            raise _Malformed("A request may not carry both Transfer-Encoding and Content-Length.")
        if [e.strip().lower() for e in ",".join(encodings).split(",")] != ["chunked"]:
            raise _Malformed("Only the chunked transfer coding is accepted.", 501)
        return _Framing("chunked")
    if lengths:
        values = {v.strip() for v in ",".join(lengths).split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise _Malformed("The Content-Length is not one number.")
        length = int(next(iter(values)))
        return _Framing("length", length) if length else _Framing("none")
    return _Framing("none")


def _response_framing(response: _Message, method: str) -> _Framing:
    status = int(response.start[1])
    if method == "HEAD" or status in {204, 304} or 100 <= status < 200:
        return _Framing("none")
    if response.all("Transfer-Encoding"):
        codings = [
            e.strip().lower() for e in ",".join(response.all("Transfer-Encoding")).split(",")
        ]
        return _Framing("chunked") if codings[-1] == "chunked" else _Framing("close")
    lengths = {v.strip() for v in ",".join(response.all("Content-Length")).split(",") if v.strip()}
    if lengths:
        if len(lengths) != 1 or not next(iter(lengths)).isdigit():
            raise _Malformed("The upstream's Content-Length is not one number.")
        return _Framing("length", int(next(iter(lengths))))
    return _Framing("close")


def _body(reader: _Reader, framing: _Framing) -> Iterator[bytes]:
    """The body's bytes as they arrive (chunked decoded; trailers dropped)."""
    if framing.kind == "length":
        left = framing.length
        while left:
            data = reader.read_some(min(left, CHUNK))
            if not data:
                raise ConnectionError("the body ended early")
            left -= len(data)
            yield data
    elif framing.kind == "close":
        while data := reader.read_some(CHUNK):
            yield data
    elif framing.kind == "chunked":
        while True:
            line = reader.readline(4096)
            size_text = line.split(b";", 1)[0].strip()
            if not line.endswith(b"\n") or not re.fullmatch(rb"[0-9A-Fa-f]{1,15}", size_text):
                raise _Malformed("A chunk's size line is malformed.")
            left = int(size_text, 16)
            if left == 0:
                while (trailer := reader.readline(HEAD_LIMIT)) not in {b"\r\n", b"\n"}:
                    if not trailer.endswith(b"\n"):
                        raise _Malformed("The chunked body ended inside its trailers.")
                return
            while left:
                data = reader.read_some(min(left, CHUNK))
                if not data:
                    raise ConnectionError("the chunked body ended early")
                left -= len(data)
                yield data
            if reader.readline(4) not in {b"\r\n", b"\n"}:
                raise _Malformed("A chunk does not end with CRLF.")


def _end_to_end(message: _Message) -> list[tuple[str, str]]:
    """The headers without the hop-by-hop ones (and those its Connection header names)."""
    named = message.tokens("Connection")
    return [
        (n, v)
        for n, v in message.headers
        if n.lower() not in HOP_BY_HOP and n.lower() not in named and n.lower() != "content-length"
    ]


def _head_bytes(start: str, headers: Iterable[tuple[str, str]]) -> bytes:
    lines = [start, *(f"{n}: {v}" for n, v in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
