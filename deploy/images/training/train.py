#!/usr/bin/env python3
"""The training image's sample program: a small, real training run with numpy.

Linear regression on synthetic data (16 features, a fixed true model plus noise), trained by
minibatch gradient descent, so the loss really falls. Each step's batch is drawn from a
generator keyed by (seed, rank, step): a resumed run draws exactly the batches the first one
would have, and ends on bit-identical weights.

What it reads, the way the platform's Job manifests set it:

* ``GPUPAAS_CHECKPOINT_DIR`` (default ``./checkpoints``): ``checkpoint.json`` there (step,
  weights, the generator's key) is written every ``--checkpoint-every`` steps by an atomic
  rename, and on SIGTERM; on start an existing one is resumed from.
* ``GPUPAAS_RESTART_COUNT``: printed with the resume line.
* ``GPUPAAS_OUTPUT_DIR`` (default ``./outputs``): ``model.json`` at the end.
* With ``NNODES`` (or ``WORLD_SIZE``) above 1: ``NODE_RANK`` (or ``RANK``), ``MASTER_ADDR`` and
  ``MASTER_PORT`` (torchrun's names). Rank 0 listens on MASTER_PORT; the others connect,
  retrying while MASTER_ADDR does not resolve or refuses. Every step the gradients are averaged
  over all ranks (an all-reduce through rank 0, summed in rank order, so every rank applies the
  same bytes). Only rank 0 writes checkpoints and outputs; it sends its state to the others
  when they connect, so all ranks resume from the step it resumed from.

Output: one JSON line per step (``{"step": 5, "loss": 0.123, "lr": 0.05}``: the portal takes
the last such line as the run's metrics), one JSON line per checkpoint saved
(``{"checkpoint": {"step": 10, "at": "2026-12-02T08:00:00Z"}}``: the platform's signal of
the last checkpoint, docs/checkpoints.md, so that a preemption chooses the runs that lose the
least work), and plain lines for what happens. Exit codes: 0 at
the end (or ``--exit-code``), 143 after SIGTERM (130 after SIGINT), 1 when a peer is lost, 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

FEATURES = 16
SEED = 20261201
CHECKPOINT = "checkpoint.json"
CHECKPOINT_FORMAT = 1
DEFAULT_PORT = 29500


class Terminated(Exception):
    """SIGTERM or SIGINT arrived; the run stops at the last completed step."""


class PeerLost(Exception):
    """Another rank went away (its connection closed or timed out)."""


_signal: list[int] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _signal.append(signum)


def _check_signal() -> None:
    if _signal:
        raise Terminated


def say(text: str) -> None:
    print(text, flush=True)


def pause(seconds: float) -> None:
    """Sleep, waking at once for SIGTERM."""
    end = time.monotonic() + seconds
    while True:
        _check_signal()
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpupaas-train", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100, help="steps in all (default 100)")
    p.add_argument("--step-seconds", type=float, default=0.0, help="extra time per step")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    p.add_argument("--batch-size", type=int, default=32, help="examples per step and rank")
    p.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints")
    p.add_argument("--exit-code", type=int, default=0, help="exit with this code at the end")
    p.add_argument("--allocate-mib", type=int, default=0, help="hold this much memory")
    p.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 0 or args.batch_size < 1 or args.checkpoint_every < 1:
        p.error("--steps must be >= 0, --batch-size and --checkpoint-every >= 1")
    return args


# --- the model --------------------------------------------------------------------------------


def true_model(seed: int) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng([seed, 0xFFFF])
    return rng.normal(0.0, 2.0, FEATURES), float(rng.normal())


def batch(seed: int, rank: int, step: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, rank, step])
    w, b = true_model(seed)
    x = rng.standard_normal((size, FEATURES))
    y = x @ w + b + rng.normal(0.0, 0.1, size)
    return x, y


def gradient(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The mean squared error's gradient over (weights, bias), with the loss appended."""
    err = x @ params[:FEATURES] + params[FEATURES] - y
    grad_w = 2.0 * (x.T @ err) / len(y)
    grad_b = 2.0 * float(err.mean())
    return np.concatenate([grad_w, [grad_b, float((err**2).mean())]])


def checksum(params: np.ndarray) -> str:
    return "sha256:" + hashlib.sha256(params.astype("<f8").tobytes()).hexdigest()[:16]


# --- checkpoints ------------------------------------------------------------------------------


def load_checkpoint(directory: Path) -> dict[str, Any] | None:
    path = directory / CHECKPOINT
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if data.get("format") != CHECKPOINT_FORMAT:
        raise SystemExit(f"{path}: not a checkpoint of this program (format {data.get('format')})")
    return data


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file beside ``path``, flush it to disk and rename it over: a reader
    (or a restart after a kill) sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # the rename itself, on filesystems that allow it
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_checkpoint(
    directory: Path,
    step: int,
    params: np.ndarray,
    args: argparse.Namespace,
    world: int,
    loss: float | None,
) -> None:
    """Save the checkpoint, then report it on the log (docs/checkpoints.md): only once it is on
    disk, so a reported checkpoint is always one a restart resumes from."""
    saved_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json_atomically(
        directory / CHECKPOINT,
        {
            "format": CHECKPOINT_FORMAT,
            "step": step,
            "weights": params[:FEATURES].tolist(),
            "bias": float(params[FEATURES]),
            "loss": loss,
            # The whole random state: batch i of rank r comes from default_rng([seed, r, i]).
            "rng": {
                "generator": "numpy.random.default_rng",
                "seed": args.seed,
                "next_step": step + 1,
            },
            "lr": args.lr,
            "batch_size": args.batch_size,
            "world_size": world,
            "saved_at": saved_at,
        },
    )
    say(json.dumps({"checkpoint": {"step": step, "at": saved_at}}))


# --- the all-reduce ---------------------------------------------------------------------------


class Peer:
    """One framed TCP connection (4-byte length, then the payload) that gives way to SIGTERM."""

    def __init__(self, sock: socket.socket, rank: int, timeout: float) -> None:
        self.sock = sock
        self.rank = rank
        self.timeout = timeout
        sock.settimeout(0.2)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, payload: bytes) -> None:
        try:
            self.sock.sendall(struct.pack(">I", len(payload)) + payload)
        except OSError as e:
            raise PeerLost(f"rank {self.rank}: {e}") from e

    def _exactly(self, n: int) -> bytes:
        chunks, got, deadline = [], 0, time.monotonic() + self.timeout
        while got < n:
            _check_signal()
            try:
                chunk = self.sock.recv(n - got)
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise PeerLost(f"rank {self.rank}: silent for {self.timeout:.0f} s") from None
                continue
            except OSError as e:
                raise PeerLost(f"rank {self.rank}: {e}") from e
            if not chunk:
                raise PeerLost(f"rank {self.rank}: connection closed")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv(self) -> bytes:
        (n,) = struct.unpack(">I", self._exactly(4))
        return self._exactly(n)

    def send_json(self, data: dict[str, Any]) -> None:
        self.send(json.dumps(data).encode())

    def recv_json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.recv())
        return data


class Group:
    """The ranks of one run; rank 0 holds a connection to every other rank."""

    def __init__(self, rank: int, world: int, peers: list[Peer]) -> None:
        self.rank, self.world, self.peers = rank, world, peers

    def allreduce_mean(self, step: int, values: np.ndarray) -> np.ndarray:
        if self.world == 1:
            return values
        if self.rank == 0:
            total = values.astype("<f8").copy()
            for peer in self.peers:  # in rank order: every run sums in the same order
                got = peer.recv()
                (their_step,) = struct.unpack(">Q", got[:8])
                if their_step != step:
                    raise PeerLost(f"rank {peer.rank} is at step {their_step}, not {step}")
                total += np.frombuffer(got[8:], dtype="<f8")
            mean = total / self.world
            for peer in self.peers:
                peer.send(mean.tobytes())
            return mean
        (master,) = self.peers
        master.send(struct.pack(">Q", step) + values.astype("<f8").tobytes())
        return np.frombuffer(master.recv(), dtype="<f8").copy()

    def close(self) -> None:
        for peer in self.peers:
            with contextlib.suppress(OSError):
                peer.sock.close()


def _rendezvous_master(world: int, port: int, timeout: float, state: dict[str, Any]) -> Group:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("", port))  # every address of the pod: the peers come by its DNS name
    listener.listen(world)
    listener.settimeout(0.2)
    say(f"rank 0 of {world}: listening on port {port} for {world - 1} peer(s)")
    peers: dict[int, Peer] = {}
    addresses: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(peers) < world - 1:
            _check_signal()
            if time.monotonic() > deadline:
                missing = sorted(set(range(1, world)) - set(peers))
                raise PeerLost(f"ranks {missing} did not connect within {timeout:.0f} s")
            try:
                conn, addr = listener.accept()
            except TimeoutError:
                continue
            peer = Peer(conn, -1, timeout)
            hello = peer.recv_json()
            rank = int(hello.get("rank", -1))
            if hello.get("world") != world or not 0 < rank < world or rank in peers:
                peer.send_json({"error": f"rank 0 expects ranks 1..{world - 1} of {world}"})
                conn.close()
                say(f"rank 0 of {world}: refused a peer from {addr[0]}: {hello}")
                continue
            peer.rank = rank
            peers[rank] = peer
            addresses[rank] = addr[0]
    finally:
        listener.close()
    ordered = [peers[r] for r in sorted(peers)]
    for peer in ordered:
        peer.send_json(state)
    listed = ", ".join(f"rank {r} ({addresses[r]})" for r in sorted(peers))
    say(f"rank 0 of {world}: connected to peers {listed}")
    return Group(0, world, ordered)


def _rendezvous_worker(
    rank: int, world: int, addr: str, port: int, timeout: float
) -> tuple[Group, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    last_note = 0.0
    while True:
        _check_signal()
        try:
            sock = socket.create_connection((addr, port), timeout=5)
            break
        except OSError as e:  # not resolvable yet (its pod has no DNS name yet), refused, …
            now = time.monotonic()
            if now > deadline:
                raise PeerLost(
                    f"rank 0 at {addr}:{port} unreachable for {timeout:.0f} s: {e}"
                ) from e
            if now - last_note > 10:
                say(f"rank {rank} of {world}: waiting for rank 0 at {addr}:{port} ({e})")
                last_note = now
            pause(0.5)
    master = Peer(sock, 0, timeout)
    master.send_json({"rank": rank, "world": world})
    state = master.recv_json()
    if "error" in state:
        raise PeerLost(f"rank 0 refused this rank: {state['error']}")
    say(f"rank {rank} of {world}: connected to peers through rank 0 at {addr}:{port}")
    return Group(rank, world, [master]), state


# --- the run ----------------------------------------------------------------------------------


def _env_int(name: str, *fallbacks: str, default: int) -> int:
    for key in (name, *fallbacks):
        value = os.environ.get(key, "").strip()
        if value:
            return int(value)
    return default


def _join(
    rank: int, world: int, timeout: float, start: int, params: np.ndarray
) -> tuple[Group, int, np.ndarray]:
    """Meet the other ranks; every rank goes on from rank 0's step and weights."""
    addr = os.environ.get("MASTER_ADDR") or "127.0.0.1"
    port = _env_int("MASTER_PORT", default=DEFAULT_PORT)
    if rank == 0:
        return (
            _rendezvous_master(world, port, timeout, {"step": start, "params": params.tolist()}),
            start,
            params,
        )
    group, state = _rendezvous_worker(rank, world, addr, port, timeout)
    if int(state["step"]) != start:
        say(f"rank {rank} of {world}: going on from rank 0's state at step {state['step']}")
    return group, int(state["step"]), np.array(state["params"], dtype="<f8")


def run(args: argparse.Namespace) -> int:
    world = _env_int("NNODES", "WORLD_SIZE", default=1)
    rank = _env_int("NODE_RANK", "RANK", default=0)
    restarts = _env_int("GPUPAAS_RESTART_COUNT", default=0)
    checkpoints = Path(os.environ.get("GPUPAAS_CHECKPOINT_DIR") or "checkpoints")
    outputs = Path(os.environ.get("GPUPAAS_OUTPUT_DIR") or "outputs")
    timeout = float(os.environ.get("GPUPAAS_RENDEZVOUS_TIMEOUT") or 600)
    if not 0 <= rank < world:
        say(f"rank {rank} is outside a world of {world}")
        return 2

    held = None
    if args.allocate_mib:
        say(f"allocating {args.allocate_mib} MiB (--allocate-mib)")
        held = np.ones(args.allocate_mib * 1024 * 1024, dtype=np.uint8)  # every page touched
        say(f"allocated {held.nbytes // (1024 * 1024)} MiB")

    params = np.zeros(FEATURES + 1)
    start = 0
    saved = load_checkpoint(checkpoints)
    if saved is not None:
        start = int(saved["step"])
        params = np.array([*saved["weights"], saved["bias"]], dtype="<f8")
        say(f"resuming from checkpoint at step {start} (restart count {restarts})")
    else:
        say(f"no checkpoint in {checkpoints}; starting at step 0 (restart count {restarts})")

    group = Group(0, 1, [])
    step, loss = start, None
    try:
        if world > 1:
            group, start, params = _join(rank, world, timeout, start, params)
            step = start
        while step < args.steps:
            _check_signal()
            x, y = batch(args.seed, rank, step + 1, args.batch_size)
            mean = group.allreduce_mean(step + 1, gradient(params, x, y))
            params = params - args.lr * mean[: FEATURES + 1]
            step, loss = step + 1, float(mean[FEATURES + 1])
            say(json.dumps({"step": step, "loss": round(loss, 6), "lr": args.lr}))
            if rank == 0 and step % args.checkpoint_every == 0:
                save_checkpoint(checkpoints, step, params, args, world, loss)
            if args.step_seconds:
                pause(args.step_seconds)
    except Terminated:
        name = signal.Signals(_signal[0]).name
        if rank == 0:
            save_checkpoint(checkpoints, step, params, args, world, loss)
            say(f"received {name} at step {step}; checkpoint saved to {checkpoints / CHECKPOINT}")
        else:
            say(f"received {name} at step {step}; rank 0 keeps the checkpoint")
        return 128 + _signal[0]
    except PeerLost as e:
        say(f"rank {rank} of {world}: lost a peer at step {step}: {e}")
        return 1
    finally:
        group.close()

    if rank == 0:
        if step % args.checkpoint_every:
            save_checkpoint(checkpoints, step, params, args, world, loss)
        write_json_atomically(
            outputs / "model.json",
            {
                "weights": params[:FEATURES].tolist(),
                "bias": float(params[FEATURES]),
                "steps": step,
                "loss": loss,
                "checksum": checksum(params),
            },
        )
    say(
        f"training done at step {step}: final weights checksum {checksum(params)} "
        f"(rank {rank} of {world})"
    )
    del held
    if args.exit_code:
        say(f"exiting with code {args.exit_code} (--exit-code)")
    return int(args.exit_code)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
