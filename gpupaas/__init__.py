"""gpupaas: a self-service internal GPU platform."""

from __future__ import annotations

from gpupaas.celery import app as celery_app

__all__ = ["celery_app"]
