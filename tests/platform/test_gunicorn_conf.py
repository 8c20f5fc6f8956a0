from __future__ import annotations

import gc
import importlib
import os

import pytest

# Importing the configuration sets the web server's database defaults in the environment
# (a pool of 8): put it back at once, or every process the rest of this test session starts
# (PostgreSQL-down tests, servers) would inherit a pool it did not ask for.
_DEFAULTS = ("DATABASE_POOL_SIZE", "DATABASE_CONN_MAX_AGE")
_ENVIRONMENT = {name: os.environ.get(name) for name in _DEFAULTS}
from gpupaas import gunicorn_conf  # noqa: E402

for _name, _value in _ENVIRONMENT.items():
    if _value is None:
        os.environ.pop(_name, None)
    else:
        os.environ[_name] = _value


@pytest.fixture(autouse=True)
def _restore_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reloading the module sets defaults in the environment; put it back after each test."""
    for name in ("DATABASE_POOL_SIZE", "DATABASE_CONN_MAX_AGE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        if not os.environ[name]:
            monkeypatch.delenv(name)


def test_workers_heartbeat_in_memory_and_one_worker_per_cpu() -> None:
    conf = importlib.reload(gunicorn_conf)
    assert conf.worker_tmp_dir == "/dev/shm"  # noqa: S108
    assert conf.workers == len(os.sched_getaffinity(0))
    assert conf.worker_class == "gpupaas.workers.UvicornWorker"


def test_a_worker_freezes_what_the_application_loaded_and_collects_less_often() -> None:
    before = gc.get_freeze_count()
    threshold = gc.get_threshold()
    try:
        gunicorn_conf.post_worker_init(worker=None)
        assert gc.get_freeze_count() > before
        assert gc.get_threshold() == (10_000, threshold[1], threshold[2])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_the_worker_is_uvicorns_and_ends_open_streams_on_a_graceful_stop() -> None:
    from gunicorn.util import load_class
    from uvicorn_worker import UvicornWorker

    worker = load_class(gunicorn_conf.worker_class)
    assert issubclass(worker, UvicornWorker)
    shutdown = worker.CONFIG_KWARGS["timeout_graceful_shutdown"]
    assert 0 < shutdown < gunicorn_conf.graceful_timeout


@pytest.mark.parametrize(
    ("name", "default", "told"),
    [("DATABASE_CONN_MAX_AGE", "0", "30"), ("DATABASE_POOL_SIZE", "8", "0")],
    ids=["connections closed per request", "a pool per worker"],
)
def test_the_web_servers_database_defaults_give_way_to_the_deployment(
    monkeypatch: pytest.MonkeyPatch, name: str, default: str, told: str
) -> None:
    monkeypatch.delenv(name, raising=False)
    importlib.reload(gunicorn_conf)
    assert os.environ[name] == default
    monkeypatch.setenv(name, told)
    importlib.reload(gunicorn_conf)
    assert os.environ[name] == told
