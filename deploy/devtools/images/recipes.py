"""What each image is: its recipe (Debian packages, commands, files, links, removals) over its
parent, and the paths and fixed values every build shares."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[3]
IMAGES_DIR = REPO_ROOT / "deploy" / "images"

# Bump when the way images are built changes (the layer writer, the archive format): every key
# changes with it.
RECIPE_VERSION = 1
# Every timestamp in the images: 2026-12-01T00:00:00Z.
SOURCE_DATE_EPOCH = 1796083200
CREATED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(SOURCE_DATE_EPOCH))

DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
JUPYTERLAB_VERSION = "4.6.6"  # with its dependencies in deploy/images/notebook/requirements.txt

REQUIREMENTS = "/tmp/requirements.txt"  # noqa: S108 - in the chroot, and not kept in the layer
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The directories whose contents never go into a layer: the runtime mounts its own.
NOT_IN_LAYERS = ("dev", "proc", "sys", "tmp", "var/tmp", "root/.cache")


class ImageError(RuntimeError):
    """An image could not be built."""


# --- recipes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Debian:
    """The root filesystem of a base image, from mmdebstrap."""

    suite: str
    packages: tuple[str, ...]
    dpkg_options: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Run:
    """A command run as root in the image's chroot."""

    what: str
    argv: tuple[str, ...]
    estimate: str = ""


@dataclass(frozen=True)
class Copy:
    """A file from deploy/images/<name>/ (or, with an absolute ``src``, from the host)."""

    src: str
    dest: str
    mode: int = 0o644


@dataclass(frozen=True)
class Link:
    dest: str
    target: str


@dataclass(frozen=True)
class Remove:
    paths: tuple[str, ...]


Step = Run | Copy | Link | Remove


@dataclass(frozen=True)
class Image:
    name: str
    references: tuple[str, ...]
    parent: str | None = None
    debian: Debian | None = None
    steps: tuple[Step, ...] = ()
    # Docker config fields set by this image (over its parent's); Env is merged by name.
    config: dict[str, Any] = field(default_factory=dict)
    pinned: dict[str, str] = field(default_factory=dict)

    @property
    def directory(self) -> Path:
        return IMAGES_DIR / self.name


def _sh(script: str) -> tuple[str, ...]:
    return ("/bin/sh", "-euc", script)


def _cmd(line: str) -> tuple[str, ...]:
    return tuple(shlex.split(line))


IMAGES: dict[str, Image] = {
    image.name: image
    for image in (
        Image(
            name="pause",
            references=("registry.k8s.io/pause:3.10", "gpupaas.local/pause:1"),
            steps=(Copy("/usr/bin/catatonit", "/pause", 0o755),),
            config={"User": "65535:65535", "Entrypoint": ["/pause", "-P"]},
        ),
        Image(
            name="base",
            references=("gpupaas.local/base:1",),
            debian=Debian(
                suite=DEBIAN_SUITE,
                packages=_cmd(
                    "python3 python3-venv python3-numpy python-is-python3 ca-certificates tini"
                ),
                # /usr merged by symlinks from the start, with usr-is-merged: else bookworm's
                # init-system-helpers brings usrmerge, and with it perl (30 MB).
                options=("--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",),
                # As Debian's slim images: no manuals, documentation (but the copyrights) or
                # translations.
                dpkg_options=(
                    "path-exclude=/usr/share/man/*",
                    "path-exclude=/usr/share/doc/*",
                    "path-include=/usr/share/doc/*/copyright",
                    "path-exclude=/usr/share/info/*",
                    "path-exclude=/usr/share/locale/*",
                ),
            ),
            steps=(
                Remove(("/etc/resolv.conf", "/etc/hostname")),  # the runtime writes its own
                Run(
                    "add the user jovyan (uid 1000, gid 100)",
                    _sh(
                        "useradd --create-home --uid 1000 --gid 100 --shell /bin/bash jovyan\n"
                        "install -d -o 1000 -g 100 /home/jovyan/work"
                    ),
                ),
                Run(
                    # Hash-based bytecode: valid whatever the files' times (they are clamped).
                    "compile Python bytecode",
                    _cmd(
                        "python3 -m compileall -q -f -j 0 --invalidation-mode checked-hash "
                        "/usr/lib/python3.11 /usr/lib/python3/dist-packages"
                    ),
                    "~30 s on 2 cores",
                ),
                Copy("try-write-root.sh", "/opt/gpupaas/try-write-root.sh", 0o755),
            ),
            config={
                "User": "1000",
                "WorkingDir": "/home/jovyan",
                "Env": {
                    "PATH": PATH,
                    "HOME": "/home/jovyan",
                    "SHELL": "/bin/bash",
                    "LANG": "C.UTF-8",
                    "PYTHONUNBUFFERED": "1",
                    "NB_USER": "jovyan",
                    "NB_UID": "1000",
                    "NB_GID": "100",
                },
                "Cmd": ["python3"],
            },
        ),
        Image(
            name="notebook",
            parent="base",
            references=(
                "quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02",
                "quay.io/jupyter/base-notebook:latest",
                "quay.io/jupyter/base-notebook:2024-12-02",
                "gpupaas.local/notebook:1",
            ),
            pinned={"jupyterlab": JUPYTERLAB_VERSION},
            steps=(
                Copy("requirements.txt", REQUIREMENTS),
                Run(
                    "create the virtual environment /opt/venv",
                    ("python3", "-m", "venv", "--system-site-packages", "/opt/venv"),
                    "~15 s",
                ),
                Run(
                    f"pip install jupyterlab=={JUPYTERLAB_VERSION} and its dependencies",
                    _cmd(
                        "/opt/venv/bin/pip install --no-cache-dir --no-compile "
                        "--disable-pip-version-check --require-hashes --only-binary=:all: "
                        f"-r {REQUIREMENTS}"
                    ),
                    "~3 min on 2 cores",
                ),
                Run("pip check", ("/opt/venv/bin/pip", "check", "--disable-pip-version-check")),
                Run(
                    "compile Python bytecode",
                    _cmd(
                        "/opt/venv/bin/python -m compileall -q -f -j 0 "
                        "--invalidation-mode checked-hash /opt/venv/lib"
                    ),
                    "~40 s on 2 cores",
                ),
                Copy("jupyter_server_config.py", "/opt/venv/etc/jupyter/jupyter_server_config.py"),
                Copy("start-notebook.py", "/usr/local/bin/start-notebook.py", 0o755),
                # As in docker-stacks: the notebook's user may pip install into the environment.
                Run("hand /opt/venv to jovyan", ("chown", "-R", "1000:100", "/opt/venv")),
                Remove((REQUIREMENTS,)),
            ),
            config={
                "Env": {
                    "PATH": f"/opt/venv/bin:{PATH}",
                    "VIRTUAL_ENV": "/opt/venv",
                    "JUPYTER_PORT": "8888",
                    "DOCKER_STACKS_JUPYTER_CMD": "lab",
                },
                "ExposedPorts": {"8888/tcp": {}},
                "Entrypoint": ["tini", "-g", "--"],
                "Cmd": ["start-notebook.py"],
            },
        ),
        Image(
            name="training",
            parent="base",
            references=("nvcr.io/nvidia/pytorch:24.12-py3", "gpupaas.local/training:1"),
            steps=(
                Copy("train.py", "/opt/gpupaas/train.py", 0o755),
                Link("/usr/local/bin/gpupaas-train", "/opt/gpupaas/train.py"),
            ),
            # Arguments alone (a Job's args) go to the program; a command replaces it.
            config={"Entrypoint": ["gpupaas-train"], "Cmd": None},
        ),
        Image(
            name="serving",
            parent="base",
            references=("docker.io/vllm/vllm-openai:v0.6.4", "gpupaas.local/serving:1"),
            steps=(
                Copy("serve.py", "/opt/gpupaas/serve.py", 0o755),
                Copy("corpus.txt", "/opt/gpupaas/corpus.txt"),
                Run(
                    "train the model",
                    (
                        "python3",
                        "-B",
                        "/opt/gpupaas/serve.py",
                        "train",
                        "--out",
                        "/opt/gpupaas/model.json",
                    ),
                    "~2 s",
                ),
                Link("/usr/local/bin/gpupaas-serve", "/opt/gpupaas/serve.py"),
            ),
            config={
                "Env": {"GPUPAAS_PORT": "8000"},
                "ExposedPorts": {"8000/tcp": {}},
                "Entrypoint": ["gpupaas-serve"],
                "Cmd": None,
            },
        ),
        Image(
            name="misbehave",
            parent="base",
            references=("gpupaas.local/runs-as-root:1",),
            config={"User": "0", "Cmd": ["/opt/gpupaas/try-write-root.sh"]},
        ),
    )
}
PAUSE = "pause"
