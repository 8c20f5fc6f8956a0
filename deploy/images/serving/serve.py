#!/usr/bin/env python3
"""The serving image's model server: a small real language model behind the OpenAI-compatible
HTTP API that vLLM's image speaks.

The model is a character-level trigram model (interpolated with bigram and unigram counts)
trained on ``corpus.txt``, a short text written for this repository. The image build trains it
(``serve.py train``) into ``model.json`` beside this file; without that file the server trains
it at start (a fraction of a second).

Endpoints:

* ``POST /v1/completions``: ``{"model", "prompt", "max_tokens", "temperature", "top_p", "seed",
  "n", "stop"}`` → ``{"id", "object": "text_completion", "created", "model", "choices": [{"text",
  "index", "logprobs", "finish_reason"}], "usage"}``. One token is one character; temperature 0
  is greedy and deterministic, a ``seed`` makes sampling repeatable.
* ``POST /v1/chat/completions``: the same model continuing the last message.
* ``GET /v1/models``, ``GET /version``, ``GET /health`` (200 once the model is loaded: the
  socket opens only then), ``GET /metrics`` (Prometheus text: requests by path and code,
  latency histograms, requests in flight, tokens).

Configuration, as the platform's endpoint manifests give it: ``GPUPAAS_PORT`` (default 8000),
``GPUPAAS_MODEL_PATH`` (a ``model.json`` of this program; anything else is reported and the
built-in model served). vLLM's ``--host``, ``--port``, ``--model`` and ``--served-model-name``
are understood, other vLLM options are reported and ignored. ``MODEL_TOKEN_DELAY_SECONDS``
adds time per generated token (to stand in for a GPU's work in tests; a name the platform lets a
user set).

SIGTERM: the server stops accepting connections, answers every request already in flight and
exits 0, so a rolling update loses no request that reached it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
BUILT_IN_MODEL = HERE / "model.json"
CORPUS = HERE / "corpus.txt"
MODEL_NAME = "gpupaas-charlm"
MODEL_FORMAT = 1
# How much each order counts when the next character is chosen: trigram, bigram, unigram.
MIX = (0.7, 0.25, 0.05)
MAX_TOKENS = 4096
MAX_BODY = 1 << 20
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PATHS = ("/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics")


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# --- the model --------------------------------------------------------------------------------


class CharModel:
    """Counts of characters, pairs and triples; the next character's distribution mixes the
    three orders (a context the text never showed falls back on the lower ones)."""

    def __init__(self, vocab: str, triples: Iterable[tuple[int, int, int, int]]) -> None:
        self.vocab = vocab
        self.index = {c: i for i, c in enumerate(vocab)}
        size = len(vocab)
        self.tri = np.zeros((size, size, size))
        for a, b, c, n in triples:
            self.tri[a, b, c] = n
        self.bi = self.tri.sum(axis=0)
        self.uni = self.bi.sum(axis=0)

    @staticmethod
    def normalise(text: str) -> str:
        return " ".join(text.split())

    @classmethod
    def train(cls, text: str) -> CharModel:
        text = cls.normalise(text)
        vocab = "".join(sorted(set(text)))
        index = {c: i for i, c in enumerate(vocab)}
        counts: dict[tuple[int, int, int], int] = {}
        for a, b, c in zip(text, text[1:], text[2:], strict=False):
            key = (index[a], index[b], index[c])
            counts[key] = counts.get(key, 0) + 1
        return cls(vocab, [(*k, n) for k, n in counts.items()])

    def to_json(self) -> dict[str, Any]:
        nonzero = np.argwhere(self.tri > 0)
        return {
            "format": MODEL_FORMAT,
            "kind": "char-trigram",
            "vocab": self.vocab,
            "triples": [[int(a), int(b), int(c), int(self.tri[a, b, c])] for a, b, c in nonzero],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CharModel:
        if data.get("format") != MODEL_FORMAT or data.get("kind") != "char-trigram":
            raise ValueError("not a char-trigram model of this server")
        return cls(str(data["vocab"]), [tuple(t) for t in data["triples"]])

    def distribution(self, a: int | None, b: int | None) -> np.ndarray:
        parts: list[tuple[float, np.ndarray]] = [(MIX[2], self.uni)]
        if b is not None:
            parts.append((MIX[1], self.bi[b]))
            if a is not None:
                parts.append((MIX[0], self.tri[a, b]))
        mixed = np.zeros(len(self.vocab))
        weight = 0.0
        for w, counts in parts:
            total = counts.sum()
            if total > 0:
                mixed += w * counts / total
                weight += w
        return mixed / weight

    def tokens(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float,
        top_p: float,
        rng: np.random.Generator,
        delay: float = 0.0,
    ) -> Iterator[str]:
        """The generated characters one by one, ``delay`` seconds apart (a GPU's pace)."""
        context = [self.index.get(c) for c in self.normalise(prompt)[-2:]]
        context = [None] * (2 - len(context)) + context
        for number in range(max_tokens):
            if delay and number:
                time.sleep(delay)
            p = self.distribution(context[-2], context[-1])
            if temperature <= 0:
                nxt = int(np.argmax(p))  # the first of equal maxima: deterministic
            else:
                p = p ** (1.0 / temperature)
                p /= p.sum()
                if top_p < 1.0:
                    order = np.argsort(-p, kind="stable")
                    keep = order[: int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1]
                    mask = np.zeros_like(p)
                    mask[keep] = p[keep]
                    p = mask / mask.sum()
                nxt = int(rng.choice(len(p), p=p))
            context = [context[-1], nxt]
            yield self.vocab[nxt]

    def generate(
        self,
        prompt: str,
        max_tokens: int,
        temperature: float,
        top_p: float,
        rng: np.random.Generator,
        stop: list[str],
        delay: float = 0.0,
    ) -> tuple[str, str]:
        out: list[str] = []
        for piece in self.tokens(prompt, max_tokens, temperature, top_p, rng, delay):
            out.append(piece)
            text = "".join(out)
            for s in stop:
                if s and s in text:
                    return text[: text.index(s)], "stop"
        return "".join(out), "length"


def load_model(path: str | None) -> tuple[CharModel, str]:
    """The model at ``path`` if it is one of ours, else the built-in one; and where it came from."""
    if path:
        try:
            return CharModel.from_json(json.loads(Path(path).read_text())), path
        except (OSError, ValueError, KeyError, TypeError) as e:
            say(f"model {path!r} is not one this server reads ({e}); serving the built-in model")
    if BUILT_IN_MODEL.exists():
        return CharModel.from_json(json.loads(BUILT_IN_MODEL.read_text())), str(BUILT_IN_MODEL)
    return CharModel.train(CORPUS.read_text()), f"{CORPUS} (trained at start)"


# --- metrics ----------------------------------------------------------------------------------


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = {}
        self.latency: dict[str, list[float]] = {}  # per path: bucket counts, then sum and count
        self.in_flight = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0

    def done(self, method: str, path: str, code: int, seconds: float) -> None:
        with self.lock:
            key = (method, path, code)
            self.requests[key] = self.requests.get(key, 0) + 1
            row = self.latency.setdefault(path, [0.0] * (len(BUCKETS) + 2))
            for i, le in enumerate(BUCKETS):
                if seconds <= le:
                    row[i] += 1
            row[-2] += seconds
            row[-1] += 1

    def tokens(self, prompt: int, generated: int) -> None:
        with self.lock:
            self.prompt_tokens += prompt
            self.generated_tokens += generated

    def render(self) -> str:
        p = "gpupaas_serving_"
        with self.lock:
            lines = [
                f"# HELP {p}requests_total HTTP requests answered, by method, path and code.",
                f"# TYPE {p}requests_total counter",
            ]
            for (method, path, code), n in sorted(self.requests.items()):
                labels = f'method="{method}",path="{path}",code="{code}"'
                lines.append(f"{p}requests_total{{{labels}}} {n}")
            lines += [
                f"# HELP {p}request_duration_seconds Time to answer a request, by path.",
                f"# TYPE {p}request_duration_seconds histogram",
            ]
            for path, row in sorted(self.latency.items()):
                for le, n in zip(BUCKETS, row, strict=False):
                    lines.append(
                        f'{p}request_duration_seconds_bucket{{path="{path}",le="{le}"}} {n:g}'
                    )
                lines.append(
                    f'{p}request_duration_seconds_bucket{{path="{path}",le="+Inf"}} {row[-1]:g}'
                )
                lines.append(f'{p}request_duration_seconds_sum{{path="{path}"}} {row[-2]:.6f}')
                lines.append(f'{p}request_duration_seconds_count{{path="{path}"}} {row[-1]:g}')
            lines += [
                f"# HELP {p}requests_in_flight Requests being answered now.",
                f"# TYPE {p}requests_in_flight gauge",
                f"{p}requests_in_flight {self.in_flight}",
                f"# HELP {p}prompt_tokens_total Prompt tokens (characters) read.",
                f"# TYPE {p}prompt_tokens_total counter",
                f"{p}prompt_tokens_total {self.prompt_tokens}",
                f"# HELP {p}generation_tokens_total Tokens (characters) generated.",
                f"# TYPE {p}generation_tokens_total counter",
                f"{p}generation_tokens_total {self.generated_tokens}",
            ]
        return "\n".join(lines) + "\n"


# --- the HTTP API -----------------------------------------------------------------------------


class BadRequest(Exception):
    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


class Server(ThreadingHTTPServer):
    # Request threads are joined when the server closes: SIGTERM waits for the requests.
    daemon_threads = False
    block_on_close = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], model: CharModel, names: list[str], delay: float
    ) -> None:
        super().__init__(address, Handler)
        self.model, self.names, self.delay = model, names, delay
        self.stats = Stats()
        self.started = int(time.time())


def _number(body: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise BadRequest(f"{key} must be a number from {low:g} to {high:g}")
    return float(value)


def _integer(body: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{key} must be an integer from {low} to {high}")
    return value


class Handler(BaseHTTPRequestHandler):
    server: Server
    server_version = "gpupaas-serve/1"

    def log_message(self, format: str, *args: Any) -> None:
        if self.path not in ("/health", "/metrics"):  # the probes and scrapes would drown it
            say(f"{self.client_address[0]} {format % args}")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._code = code

    def _json(self, code: int, data: dict[str, Any]) -> None:
        self._send(code, json.dumps(data).encode(), "application/json")

    def _error(self, code: int, message: str) -> None:
        kind = {400: "BadRequestError", 404: "NotFoundError"}.get(code, "InternalServerError")
        self._json(
            code, {"object": "error", "message": message, "type": kind, "param": None, "code": code}
        )

    def _handle(self, method: str) -> None:
        started = time.monotonic()
        stats = self.server.stats
        path = self.path.split("?", 1)[0]
        self._code = 500
        with stats.lock:
            stats.in_flight += 1
        try:
            route = ROUTES.get((method, path))
            if route is None:
                self._error(404, f"no route for {method} {path}")
            else:
                route(self)
        except BadRequest as e:
            self._error(e.code, str(e))
        except (BrokenPipeError, ConnectionResetError):
            self._code = 499  # the client went away
        finally:
            with stats.lock:
                stats.in_flight -= 1
            stats.done(
                method, path if path in PATHS else "other", self._code, time.monotonic() - started
            )

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise BadRequest("bad Content-Length") from None
        if length > MAX_BODY:
            raise BadRequest(f"the body is over {MAX_BODY} bytes")
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
        except ValueError as e:
            raise BadRequest(f"the body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise BadRequest("the body must be a JSON object")
        return data

    # --- routes ---

    def health(self) -> None:
        self._send(200, b"", "text/plain")

    def metrics(self) -> None:
        self._send(200, self.server.stats.render().encode(), "text/plain; version=0.0.4")

    def version(self) -> None:
        self._json(200, {"version": "gpupaas-charlm 1"})

    def models(self) -> None:
        data = [
            {
                "id": name,
                "object": "model",
                "created": self.server.started,
                "owned_by": "gpupaas",
                "root": self.server.names[0],
                "parent": None,
                "max_model_len": MAX_TOKENS,
            }
            for name in self.server.names
        ]
        self._json(200, {"object": "list", "data": data})

    def _sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        """The sampling parameters of a request, checked."""
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise BadRequest("seed must be a non-negative integer")
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise BadRequest("stop must be a string or a list of strings")
        return {
            "max_tokens": _integer(body, "max_tokens", 16, 1, MAX_TOKENS),
            "temperature": _number(body, "temperature", 1.0, 0.0, 2.0),
            "top_p": _number(body, "top_p", 1.0, 1e-9, 1.0),
            "n": _integer(body, "n", 1, 1, 16),
            "rng": np.random.default_rng(seed),
            "stop": stop,
        }

    def _generate(
        self, body: dict[str, Any], prompts: list[str]
    ) -> tuple[list[tuple[str, str]], int]:
        sampling = self._sampling(body)
        model = self.server.model
        results = [
            model.generate(
                p,
                sampling["max_tokens"],
                sampling["temperature"],
                sampling["top_p"],
                sampling["rng"],
                sampling["stop"],
                self.server.delay,
            )
            for p in prompts
            for _ in range(sampling["n"])
        ]
        prompt_tokens = sum(len(p) for p in prompts)
        self.server.stats.tokens(prompt_tokens, sum(len(t) for t, _ in results))
        return results, prompt_tokens

    def _stream(
        self,
        body: dict[str, Any],
        prompt: str,
        kind: tuple[str, str],
        choice: Callable[[str, str | None], dict[str, Any]],
    ) -> None:
        """Server-sent events, one per generated character as it is made (``data: {...}``, the
        one choice ``choice`` makes of it in the envelope of ``kind``: the id's prefix and the
        object's name), then ``data: [DONE]``; the connection ends the response (no length is
        known)."""
        prefix, name = kind
        envelope = {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "object": name,
            "created": int(time.time()),
            "model": self._model_name(body),
        }

        def chunk(text: str, reason: str | None) -> dict[str, Any]:
            return {**envelope, "choices": [choice(text, reason)]}

        sampling = self._sampling(body)
        if sampling["n"] != 1 or sampling["stop"]:
            raise BadRequest("stream answers one choice without stop strings")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self._code = 200
        self.close_connection = True
        generated = 0
        pieces = self.server.model.tokens(
            prompt,
            sampling["max_tokens"],
            sampling["temperature"],
            sampling["top_p"],
            sampling["rng"],
            self.server.delay,
        )
        for piece in pieces:
            generated += 1
            self._event(chunk(piece, None))
        self._event(chunk("", "length"))
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.server.stats.tokens(len(prompt), generated)

    def _event(self, data: Any) -> None:
        self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        self.wfile.flush()

    def _model_name(self, body: dict[str, Any]) -> str:
        # Any name is answered (the deployment names the model, not the caller); it is echoed.
        name = body.get("model")
        return name if isinstance(name, str) and name else self.server.names[0]

    @staticmethod
    def _usage(prompt_tokens: int, results: list[tuple[str, str]]) -> dict[str, int]:
        generated = sum(len(t) for t, _ in results)
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": generated,
            "total_tokens": prompt_tokens + generated,
        }

    def completions(self) -> None:
        body = self.body()
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if (
            not isinstance(prompts, list)
            or not prompts
            or not all(isinstance(p, str) for p in prompts)
        ):
            raise BadRequest("prompt must be a string or a non-empty list of strings")
        if body.get("stream"):
            if len(prompts) != 1:
                raise BadRequest("stream answers one prompt")
            self._stream(
                body,
                prompts[0],
                ("cmpl", "text_completion"),
                lambda text, reason: {
                    "text": text,
                    "index": 0,
                    "logprobs": None,
                    "finish_reason": reason,
                },
            )
            return
        results, prompt_tokens = self._generate(body, prompts)
        choices = [
            {"text": text, "index": i, "logprobs": None, "finish_reason": reason}
            for i, (text, reason) in enumerate(results)
        ]
        self._json(
            200,
            {
                "id": f"cmpl-{uuid.uuid4().hex}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": self._model_name(body),
                "choices": choices,
                "usage": self._usage(prompt_tokens, results),
            },
        )

    def chat_completions(self) -> None:
        body = self.body()
        messages = body.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)
        ):
            raise BadRequest("messages must be a non-empty list of {role, content}")
        if body.get("stream"):
            self._stream(
                body,
                messages[-1]["content"],
                ("chatcmpl", "chat.completion.chunk"),
                lambda text, reason: {
                    "index": 0,
                    "delta": {"content": text} if text else {},
                    "finish_reason": reason,
                },
            )
            return
        results, prompt_tokens = self._generate(body, [messages[-1]["content"]])
        choices = [
            {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": reason}
            for i, (text, reason) in enumerate(results)
        ]
        self._json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self._model_name(body),
                "choices": choices,
                "usage": self._usage(prompt_tokens, results),
            },
        )


ROUTES = {
    ("GET", "/health"): Handler.health,
    ("GET", "/metrics"): Handler.metrics,
    ("GET", "/version"): Handler.version,
    ("GET", "/v1/models"): Handler.models,
    ("POST", "/v1/completions"): Handler.completions,
    ("POST", "/v1/chat/completions"): Handler.chat_completions,
}


# --- the command ------------------------------------------------------------------------------


def train_command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="serve.py train", description="Train the built-in model.")
    p.add_argument("--corpus", type=Path, default=CORPUS)
    p.add_argument("--out", type=Path, default=BUILT_IN_MODEL)
    args = p.parse_args(argv)
    model = CharModel.train(args.corpus.read_text())
    args.out.write_text(json.dumps(model.to_json(), separators=(",", ":")) + "\n")
    say(
        f"trained a character trigram model on {args.corpus}: {len(model.vocab)} characters, "
        f"{int((model.tri > 0).sum())} triples -> {args.out}"
    )
    return 0


def serve_command(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gpupaas-serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")  # noqa: S104 - a server in its own pod
    p.add_argument("--port", type=int, default=int(os.environ.get("GPUPAAS_PORT") or 8000))
    p.add_argument("--model", default=os.environ.get("GPUPAAS_MODEL_PATH") or None)
    p.add_argument("--served-model-name", nargs="+", default=None)
    p.add_argument(
        "--token-delay",
        type=float,
        default=float(os.environ.get("MODEL_TOKEN_DELAY_SECONDS") or 0),
        help="seconds per generated token",
    )
    args, ignored = p.parse_known_args(argv)
    if ignored:
        say(f"ignoring options this server does not use: {' '.join(ignored)}")
    model, source = load_model(args.model)
    names = args.served_model_name or [MODEL_NAME]
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()
        signal.signal(signum, signal.SIG_DFL)  # a second one ends it at once

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = Server((args.host, args.port), model, names, args.token_delay)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    say(
        f"serving {names[0]} (from {source}) on http://{args.host}:{server.server_port}: "
        "/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics"
    )
    while not stop.wait(0.5):
        pass
    server.shutdown()  # the accept loop ends: no new connection is taken
    say(
        f"received {received[0]}: no longer accepting connections; "
        f"finishing {server.stats.in_flight} request(s) in flight"
    )
    server.server_close()  # closes the socket, then waits for every request thread
    thread.join()
    say("all requests answered; exiting")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train"]:
        return train_command(argv[1:])
    return serve_command(argv)


if __name__ == "__main__":
    sys.exit(main())
