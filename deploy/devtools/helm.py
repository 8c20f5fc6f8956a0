"""Build (once) and find the ``helm`` command the chart tests use.

helm is built from its Go module (``go install helm.sh/helm/v3/cmd/helm@HELM_VERSION``) and
cached outside git, like kubesim:
``${HELM_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/gpupaas/helm}/<version>/helm``.

Command line::

    python -m deploy.devtools.helm build      # prints the binary path

Environment: ``HELM_BINARY`` (use this one, never build), ``HELM_CACHE_DIR``, and the Go
toolchain found as for kubesim (``KUBESIM_GO``, ``go`` on PATH, /usr/local/go/bin/go).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from deploy.devtools import gobuild
from deploy.devtools.kubesim import _file_lock, _tail, require_go

HELM_VERSION = "v3.22.0"
HELM_MODULE = "helm.sh/helm/v3/cmd/helm"
# The packages `go install` compiled for it on a fresh machine after kubesim's build (the
# standard library and shared modules were in the build cache), and that build's minutes on
# 2 cores (139 s): the denominators of the progress it prints.
HELM_PACKAGES = 613
COLD_BUILD_MINUTES = 3
REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "deploy" / "helm" / "gpupaas"


class HelmError(RuntimeError):
    """helm could not be built."""


def cache_root() -> Path:
    env = os.environ.get("HELM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "gpupaas" / "helm"


def cached_binary_path() -> Path:
    return cache_root() / HELM_VERSION / "helm"


def ensure_binary(*, verbose: bool = True) -> Path:
    """The helm binary, built on first use (file-locked: parallel callers build it once)."""
    override = os.environ.get("HELM_BINARY")
    if override:
        path = Path(override).expanduser()
        if not path.is_file():
            raise HelmError(f"HELM_BINARY={override} does not exist")
        return path
    target = cached_binary_path()
    if target.is_file():
        return target
    go = require_go()
    target.parent.mkdir(parents=True, exist_ok=True)
    with _file_lock(target.parent / ".lock", what="helm", tool="helm"):
        if target.is_file():
            return target
        log_path = target.parent / "build.log"
        if verbose:
            print(
                f"helm: building {target} (about {COLD_BUILD_MINUTES} minutes cold on 2 cores; "
                f"progress every {gobuild.PROGRESS_EVERY:.0f} s, log {log_path})",
                file=sys.stderr,
                flush=True,
            )
        started = time.monotonic()
        with tempfile.TemporaryDirectory(dir=target.parent) as gobin:
            env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOBIN": gobin}
            cmd = [
                go, "install", "-v", *gobuild.COMMON_FLAGS, "-ldflags", "-s -w",
                f"{HELM_MODULE}@{HELM_VERSION}",
            ]  # fmt: skip
            # `go list` takes no module@version outside a module: the total is as measured.
            returncode = gobuild.run_with_progress(
                cmd, cwd=None, env=env, log_path=log_path, total=HELM_PACKAGES, name="helm"
            )
            if returncode != 0:
                raise HelmError(
                    f"building helm failed (exit {returncode}): {' '.join(cmd)}\n"
                    f"{_tail(log_path, 40)}"
                )
            (Path(gobin) / "helm").replace(target)
        if verbose:
            print(f"helm: built in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.devtools.helm")
    parser.add_argument("command", choices=["build"])
    parser.parse_args(argv)
    print(ensure_binary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
