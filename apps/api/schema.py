"""The OpenAPI document and its interactive docs.

The document (120–250 KB) depends only on the code, so each process builds it once per
format (YAML or JSON) and serves the same bytes afterwards, with an ETag: a client that
already has it gets 304. ``?lang`` and ``?version`` select nothing here (one language, one
version), so they cannot be used to make the process build and keep more copies.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.request import Request


@dataclass(frozen=True)
class RenderedSchema:
    content: bytes
    content_type: str
    etag: str
    disposition: str


_built: dict[str, RenderedSchema] = {}
_lock = threading.Lock()


def forget_schema() -> None:
    """Drop the built documents (tests that change the API's settings)."""
    with _lock:
        _built.clear()


class CachedSchemaView(SpectacularAPIView):
    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        media_type = request.accepted_media_type
        rendered = _built.get(media_type)
        if rendered is None:
            with _lock:
                rendered = _built.get(media_type)
                if rendered is None:
                    rendered = _built[media_type] = self._build(request)
        if rendered.etag in _etags(request.headers.get("If-None-Match", "")):
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(rendered.content, content_type=rendered.content_type)
            response["Content-Disposition"] = rendered.disposition
        response["ETag"] = rendered.etag
        response["Cache-Control"] = "public, no-cache"  # revalidate with the ETag
        return response

    def _build(self, request: Request) -> RenderedSchema:
        version = None  # one version of the API; see the module's docstring
        generator = self.generator_class(
            urlconf=self.urlconf, api_version=version, patterns=self.patterns
        )
        data = generator.get_schema(request=request, public=self.serve_public)
        renderer = request.accepted_renderer
        content = renderer.render(data, request.accepted_media_type, self.get_renderer_context())
        charset = getattr(renderer, "charset", None)
        content_type = request.accepted_media_type + (f"; charset={charset}" if charset else "")
        return RenderedSchema(
            content=content,
            content_type=content_type,
            etag=f'"{hashlib.sha256(content).hexdigest()[:32]}"',
            disposition=f'inline; filename="{self._get_filename(request, version)}"',
        )


def _etags(header: str) -> set[str]:
    return {tag.strip().removeprefix("W/") for tag in header.split(",") if tag.strip()}


class DocsView(SpectacularSwaggerSplitView):
    """Swagger UI with its start-up script served as a file of its own (``?script``), so the
    page runs under the portal's Content-Security-Policy without inline scripts; the page's
    own style sheet is a file too (templates/api/swagger_ui.html)."""

    template_name = "api/swagger_ui.html"
