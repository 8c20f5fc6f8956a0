"""Starting the gateway, and its command line."""

from __future__ import annotations

import argparse
import contextlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from deploy.devtools.dev_gateway.proxy import Gateway
from deploy.devtools.dev_gateway.routes import DEFAULT_LIMITS, Limits, parse_size


def start(
    port: int = 0,
    *,
    portal_url: str = "",
    auth_url: str = "",
    kubeconfig: Path | str | None = None,
    stand_in: bool = False,
    refresh_seconds: float = 2.0,
    limits: Limits = DEFAULT_LIMITS,
    bind: str = "127.0.0.1",
) -> tuple[Gateway, threading.Thread]:
    """A gateway on ``port`` (0: any free one) serving in a thread; ``shutdown()`` and
    ``server_close()`` it when done. With ``kubeconfig`` it routes by the cluster's Ingresses
    (read once before this returns, when the cluster answers); with ``portal_url`` alone it
    answers every ``/notebooks/`` path with the stand-in page, authorised by the portal."""
    gateway = Gateway(
        port,
        bind=bind,
        kubeconfig=kubeconfig,
        portal_url=portal_url,
        auth_url=auth_url,
        stand_in=stand_in,
        refresh_seconds=refresh_seconds,
        limits=limits,
    )
    if gateway.routes is not None and gateway.routes.kubeconfig.exists():
        with contextlib.suppress(Exception):
            gateway.refresh()
    thread = threading.Thread(
        target=gateway.serve_forever, args=(0.1,), name="dev-gateway", daemon=True
    )
    thread.start()
    return gateway, thread


def main(argv: Sequence[str] | None = None) -> int:
    from deploy.devtools import dev_gateway  # the package, whose docstring describes the tool

    parser = argparse.ArgumentParser(
        prog="python -m deploy.devtools.dev_gateway",
        description=(dev_gateway.__doc__ or "").splitlines()[0],
    )
    parser.add_argument("--port", type=int, default=8890)
    parser.add_argument("--bind", default="127.0.0.1", help="the address to listen on")
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        help="route by this cluster's Ingresses (waits for the file while the cluster starts)",
    )
    parser.add_argument("--refresh", type=float, default=2.0, help="seconds between listings")
    parser.add_argument(
        "--portal",
        default="",
        help="serve /notebooks/ paths that no Ingress routes with the stand-in page, "
        "authorised by PORTAL/notebooks/auth/ (the only routes without --kubeconfig)",
    )
    parser.add_argument("--auth-url", default="", help="with --portal: ask here instead")
    parser.add_argument(
        "--stand-in",
        action="store_true",
        help="answer with the stand-in page where a Service's ready endpoints are all on "
        "simulated nodes (annotated kubesim.io/node: fake; their pods run no containers)",
    )
    parser.add_argument("--connect-timeout", type=float, default=Limits.connect_timeout)
    parser.add_argument("--read-timeout", type=float, default=Limits.read_timeout)
    parser.add_argument("--send-timeout", type=float, default=Limits.send_timeout)
    parser.add_argument(
        "--max-body-size",
        default="1m",
        help="ingress-nginx's proxy-body-size where an Ingress sets none (0: no limit)",
    )
    parser.add_argument("--quiet", action="store_true", help="no line per request")
    args = parser.parse_args(argv)
    if not args.kubeconfig and not args.portal:
        parser.error("give --kubeconfig, --portal or both")
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    limits = Limits(
        connect_timeout=args.connect_timeout,
        read_timeout=args.read_timeout,
        send_timeout=args.send_timeout,
        max_body=parse_size(args.max_body_size),
    )
    gateway = Gateway(
        args.port,
        bind=args.bind,
        kubeconfig=args.kubeconfig,
        portal_url=args.portal,
        auth_url=args.auth_url,
        stand_in=args.stand_in,
        refresh_seconds=args.refresh,
        limits=limits,
    )
    where = f"the Ingresses of {args.kubeconfig}" if args.kubeconfig else "no cluster"
    extra = f", stand-in notebooks authorised by {gateway.auth_url}" if args.portal else ""
    print(f"dev gateway on {gateway.url}: {where}{extra}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        gateway.serve_forever()
    gateway.server_close()
    return 0
