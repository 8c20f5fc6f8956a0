"""Container images for the development cluster's real nodes, built here without any registry.

In parts: :mod:`.recipes` (what each image is), :mod:`.progress` (what a build says as it
goes), :mod:`.cache` (cache keys, scratch and cache directories, the build lock),
:mod:`.layers` (root filesystems, layers and the chroot), :mod:`.build` (archives, building,
pruning and the command line).

Command line (as root: the builds use ``mmdebstrap --mode=root`` and ``chroot``)::

    python -m deploy.devtools.images build [--only NAME ...] [--rebuild]
    python -m deploy.devtools.images keys      # each image's cache key, nothing built
    python -m deploy.devtools.images prune     # remove cached images of older recipes

``build`` prints the path of an index file that lists every archive and the references the node
tags it with (``ensure_images()`` returns the same path to Python callers)::

    {"images": [{"name": "notebook", "archive": "/abs/…/image.tar",
                 "references": ["quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02", …],
                 "key": "…", "size": 123}, …],
     "pause": {"archive": "/abs/…/image.tar", "reference": "registry.k8s.io/pause:3.10",
               "references": ["registry.k8s.io/pause:3.10", "gpupaas.local/pause:1"], …}}

Each archive is in ``docker save`` format with every reference in ``RepoTags``, so
``ctr -n k8s.io images import ARCHIVE`` (containerd 1.6) names the image after each of them
directly; ``ctr images tag`` adds more. The manifests run them with imagePullPolicy IfNotPresent.

The images (their files are under deploy/images/<name>/):

* ``pause``: the static ``catatonit`` of the host's Debian package as /pause, run ``-P``.
* ``base``: Debian bookworm with python3 (+ venv, numpy from Debian, ca-certificates, tini)
  and the docker-stacks user ``jovyan`` (uid 1000, gid 100, HOME /home/jovyan, image USER
  1000); /opt/gpupaas/try-write-root.sh, a probe for security tests.
* ``notebook``: JupyterLab (pinned with every dependency and its hash in
  notebook/requirements.txt) in /opt/venv, started by ``start-notebook.py`` as in the Jupyter
  docker-stacks images.
* ``training``: /opt/gpupaas/train.py (``gpupaas-train``): numpy training that checkpoints,
  resumes, handles SIGTERM and all-reduces over TCP between replicas.
* ``serving``: /opt/gpupaas/serve.py (``gpupaas-serve``): an OpenAI-compatible server of a
  character trigram model trained during the build.
* ``misbehave``: the base image with USER 0, for tests that must refuse it.

How they are built, and why not with buildah/podman: ``mmdebstrap`` writes the Debian root
filesystem into a directory, and this module does the rest itself. It runs each step in a
``chroot`` inside a private mount namespace (``unshare -m``: a /dev of its own, /proc, and the
host's resolv.conf and CA bundle bind-mounted; all of it vanishes with the namespace), finds
what a step changed by comparing two ``lstat`` walks of the tree, and writes that as a layer
tar (sorted, numeric owners, times clamped to SOURCE_DATE_EPOCH, deletions as whiteouts) into
a ``docker save`` archive. A child image starts from its parent's layers unpacked by GNU tar.
The trees are put together in /dev/shm (see ``scratch_dir``). Speed is not the reason: with
its storage on the same tmpfs, ``podman import`` of the base took 6.1 s, ``podman save`` 1.7 s
and a ``buildah from``/``run --isolation chroot``/``commit`` 0.9 s, against 1.0 s for this
module's base layer and 1-2 s for its archive. The reasons are that this keeps no state
outside the cache directory (podman's storage, its locks and /dev/shm/libpod_lock would be
shared with anything else on the machine), needs no container runtime (podman here wants runc
and explicit ulimits under cgroup v1), writes the same layer bytes for the same tree (tested),
and is standard-library Python only, so it runs under plain python3 as well.

Cache: ``${GPUPAAS_IMAGE_CACHE_DIR:-~/.cache/gpupaas/images}/<key>/`` holds ``image.tar``
(the archive), ``image.json`` (its layers, config, Debian packages, build time) and
``build.log``. The key is a sha256 over the recipe below, the files under
deploy/images/<name>/, the pinned versions, the host files copied in (catatonit) and the
parent's key: an edited file rebuilds that image and its children, nothing else. Debian
packages are the mirror's current bookworm ones when the base is built (the mirror keeps no old
versions to pin to); their list is in image.json, and ``build --only base --rebuild`` takes
newer ones (``--rebuild`` builds the images named again, their parents come from the cache).
notebook/requirements.txt pins wheels for x86_64. A build holds ``locks/<key>.lock``
(fcntl): a second build of the same image waits, says so and who holds it, and then finds the
first one's result; an image is moved into place only when complete.

Measured on a 2-core machine shared with other builds (load average 6-12), cold cache, trees
in /dev/shm: base 50 s (mmdebstrap 46 s, downloads included), notebook 34 s (pip install
14 s, bytecode 8 s), training 1.1 s, serving 1.5 s, misbehave 0.3 s, pause 0.0 s: all of them
in 1 min 28 s. Archive sizes: pause 0.7 MB; base, training, serving, misbehave 178.9 MB (one
shared base layer; the training and serving layers are 30-40 KB); notebook 416.6 MB (+238
MB). Everything cached: 0.3 s. ``ctr -n k8s.io images import`` into a scratch containerd
1.6.20: 8-34 s an archive on that loaded disk, every reference listed by ``ctr images ls``.
With the trees on that disk instead (ext4 with synchronous discard) the same builds took
12 min 39 s, removing the notebook's tree alone 4 min 27 s.
"""

from __future__ import annotations

from deploy.devtools.images.build import (
    Built,
    Opener,
    _write_archive,
    build_image,
    ensure_images,
    main,
    prune,
)
from deploy.devtools.images.cache import (
    SHM,
    _locked,
    cache_dir,
    cache_key,
    scratch_dir,
)
from deploy.devtools.images.layers import (
    DEV_NODES,
    HOST_CA_BUNDLE,
    PASSED_ENV,
    Layer,
    Snapshot,
    run_in_chroot,
    snapshot,
    write_layer,
)
from deploy.devtools.images.progress import (
    say,
)
from deploy.devtools.images.recipes import (
    CREATED,
    DEBIAN_SOURCES,
    DEBIAN_SUITE,
    IMAGES,
    IMAGES_DIR,
    JUPYTERLAB_VERSION,
    NOT_IN_LAYERS,
    PATH,
    PAUSE,
    RECIPE_VERSION,
    REPO_ROOT,
    REQUIREMENTS,
    SOURCE_DATE_EPOCH,
    Copy,
    Debian,
    Image,
    ImageError,
    Link,
    Remove,
    Run,
    Step,
)

__all__ = [
    "CREATED",
    "DEBIAN_SOURCES",
    "DEBIAN_SUITE",
    "DEV_NODES",
    "HOST_CA_BUNDLE",
    "IMAGES",
    "IMAGES_DIR",
    "JUPYTERLAB_VERSION",
    "NOT_IN_LAYERS",
    "PASSED_ENV",
    "PATH",
    "PAUSE",
    "RECIPE_VERSION",
    "REPO_ROOT",
    "REQUIREMENTS",
    "SHM",
    "SOURCE_DATE_EPOCH",
    "Built",
    "Copy",
    "Debian",
    "Image",
    "ImageError",
    "Layer",
    "Link",
    "Opener",
    "Remove",
    "Run",
    "Snapshot",
    "Step",
    "_locked",
    "_write_archive",
    "build_image",
    "cache_dir",
    "cache_key",
    "ensure_images",
    "main",
    "prune",
    "run_in_chroot",
    "say",
    "scratch_dir",
    "snapshot",
    "write_layer",
]
