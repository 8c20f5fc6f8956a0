"""The attack "no Content-Security-Policy header": every answer carries a strict policy, and
nothing in the templates or static files needs an exception to it (no inline scripts, inline
styles or event-handler attributes). Chromium checks the pages themselves in
tests/browser/test_content_security_policy.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db

REPO_ROOT = Path(__file__).resolve().parents[2]


def _directives(header: str) -> dict[str, list[str]]:
    parts = (p.strip().split() for p in header.split(";") if p.strip())
    return {p[0]: p[1:] for p in parts}


@pytest.mark.parametrize(
    "path",
    ["/", "/accounts/login/", "/usage/", "/usage/chargeback/", "/api/v1/me/", "/api/docs/"],
)
def test_every_answer_carries_a_strict_content_security_policy(cast: Cast, path: str) -> None:
    client = Client()
    if path != "/accounts/login/":
        client.force_login(cast.owner)
    response = client.get(path)
    assert response.status_code == 200
    policy = _directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert set(policy["img-src"]) == {"'self'", "data:"}
    for values in policy.values():
        assert not {"'unsafe-inline'", "'unsafe-eval'", "*"} & set(values)


INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
STYLE_ATTRIBUTE = re.compile(r"\sstyle\s*=", re.I)
HANDLER_ATTRIBUTE = re.compile(r"\son[a-z]+\s*=\s*[\"']", re.I)
JS_URL = re.compile(r"javascript:", re.I)


def test_templates_have_no_inline_scripts_styles_or_handlers() -> None:
    found = []
    for path in sorted((REPO_ROOT / "templates").rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        for name, pattern in (
            ("inline script", INLINE_SCRIPT),
            ("<style>", STYLE_ELEMENT),
            ("style attribute", STYLE_ATTRIBUTE),
            ("event handler", HANDLER_ATTRIBUTE),
            ("javascript: URL", JS_URL),
        ):
            found += [f"{path.relative_to(REPO_ROOT)}: {name}" for _ in pattern.finditer(text)]
    assert found == []


def test_portal_scripts_write_no_markup_from_data() -> None:
    """The portal's own scripts build nodes and text, never HTML from strings (which a
    policy with 'self' scripts would still run as markup)."""
    for path in sorted((REPO_ROOT / "static" / "js").glob("*.js")):
        text = path.read_text(encoding="utf-8")
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, path.name
        assert "eval(" not in text and "new Function" not in text, path.name
