"""axe-core (npm, pinned in tests/browser/axe/package.json) in the browser tests: installed
with ``npm ci`` once, injected into a page as an init script (which the page's Content
Security Policy does not block), and run with the WCAG 2 A and AA rules."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

AXE_DIR = Path(__file__).resolve().parent / "axe"
AXE_SCRIPT = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
NPM_CI_TIMEOUT = 300
SERIOUS = ("serious", "critical")

RUN_AXE = """async () => {
  const result = await axe.run(document, {
    runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']},
    resultTypes: ['violations'],
  });
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' — ' + n.failureSummary),
  }));
}"""


def axe_script() -> Path:
    """The path of axe.min.js, after ``npm ci`` in tests/browser/axe if it is missing."""
    if AXE_SCRIPT.is_file():
        return AXE_SCRIPT
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("`npm` (Node.js) is needed to install axe-core for the accessibility tests.")
    lock_path = Path(tempfile.gettempdir()) / "gpupaas-axe-npm-ci.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not AXE_SCRIPT.is_file():
                result = subprocess.run(
                    [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                    cwd=AXE_DIR,
                    capture_output=True,
                    text=True,
                    timeout=NPM_CI_TIMEOUT,
                    check=False,
                )
                if result.returncode != 0:
                    pytest.fail(f"npm ci in {AXE_DIR} failed:\n{result.stderr[-2000:]}")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return AXE_SCRIPT


def with_axe(page: Any) -> Any:
    """Make axe available on every page ``page`` loads from now on."""
    page.context.add_init_script(path=str(axe_script()))
    return page


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """The page's serious and critical axe violations (after it has loaded)."""
    page.wait_for_load_state("load")
    found: list[dict[str, Any]] = page.evaluate(RUN_AXE)
    return [v for v in found if v["impact"] in SERIOUS]
