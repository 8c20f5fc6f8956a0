from __future__ import annotations

from tests.portal.conftest import portal as portal  # the catalog fixture, for the form fuzz
