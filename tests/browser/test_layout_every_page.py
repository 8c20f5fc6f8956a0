"""Every portal page at a desktop width (1366 px) and on a phone (375 px): no text overflows
its cell, and no word is broken mid-word (the quota table once broke "Tea m" and "Visi on" at
1366 px, and clipped its Limit column)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from apps.workloads import core
from tests.portal.conftest import Portal

pytestmark = pytest.mark.browser

SIZES = {"desktop": (1366, 768), "phone": (375, 812)}

# In the page: cells whose content is wider than the cell, and words (letters only, so ids,
# image references and URLs, which may wrap anywhere, are left out) drawn on two lines.
LAYOUT_PROBLEMS = """
() => {
  const problems = [];
  const shown = (e) => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden";
  for (const cell of document.querySelectorAll("main td, main th, main dd, main dt")) {
    if (!shown(cell) || cell.closest(".sr-only")) continue;
    if (cell.scrollWidth > cell.clientWidth + 1) {
      const text = cell.textContent.trim().slice(0, 40);
      problems.push(`overflows its cell: ${cell.tagName} "${text}"`);
    }
  }
  const walker = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || !shown(parent)) continue;
    if (parent.closest(".mono, .break, code, pre, .sr-only, svg")) continue;
    const words = /\\p{L}{2,}/gu;
    for (const match of node.data.matchAll(words)) {
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const boxes = [...range.getClientRects()].filter((r) => r.width > 0);
      const lines = new Set(boxes.map((r) => Math.round(r.top)));
      if (lines.size > 1) problems.push(`word broken across lines: "${match[0]}"`);
    }
  }
  return problems;
}
"""


def pages(portal: Portal) -> list[str]:
    slug = portal.cast.team.slug
    job = portal.workload(name="resnet-layout", state=core.RUNNING)
    return [
        "/",
        "/workloads/",
        "/workloads/new/",
        "/workloads/new/notebook/",
        "/workloads/new/training/",
        "/workloads/new/sweep/",
        "/workloads/templates/",
        "/workloads/sizing/",
        f"/workloads/{job.pk}/",
        f"/teams/{slug}/",
        f"/teams/{slug}/policy/",
        f"/teams/{slug}/budget/",
        f"/teams/{slug}/datasets/",
        f"/teams/{slug}/secrets/",
        "/quota-requests/",
        "/reservations/",
        "/usage/",
        "/usage/heatmap/",
        "/usage/idle/",
        "/usage/chargeback/",
        f"/usage/teams/{slug}/",
        "/overview/",
        "/notifications/",
        "/notifications/preferences/",
        "/accounts/profile/",
        "/accounts/tokens/",
    ]


@pytest.mark.parametrize("size", sorted(SIZES))
def test_no_text_overflows_its_cell_and_no_word_breaks_on_any_page(
    portal: Portal, signed_in: Callable[..., Any], size: str
) -> None:
    page = signed_in(portal.cast.lead, viewport=SIZES[size])
    found: dict[str, list[str]] = {}
    for path in pages(portal):
        response = page.goto(page.base_url + path)
        assert response is not None and response.status < 400, path
        page.wait_for_load_state("networkidle")
        problems = page.evaluate(LAYOUT_PROBLEMS)
        if problems:
            found[path] = sorted(set(problems))[:8]
    assert found == {}, f"at {size} {SIZES[size]}: {found}"


def test_the_request_form_shows_no_verdict_before_anything_is_typed(
    portal: Portal, signed_in: Callable[..., Any]
) -> None:
    page = signed_in(portal.cast.owner)
    for kind in ("notebook", "training", "sweep"):
        page.goto(page.base_url + f"/workloads/new/{kind}/")
        page.wait_for_load_state("networkidle")
        assert (
            page.locator(".verdict-refused, .verdict .error, #verdict [role=alert]").count() == 0
        ), kind
