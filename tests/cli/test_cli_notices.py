"""``gpupaas notices`` and the list's new filters, against the live test server."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from apps.notifications.core import NoticeEvent
from apps.notifications.models import Notice
from apps.notifications.services import notify
from tests.cli.conftest import Cli
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db(transaction=True)


def test_notices_listed_then_marked_read(cast: Cast, cli_for: Callable[..., Cli]) -> None:
    notify(event=NoticeEvent.FAILED, users=[cast.owner], title="resnet failed", body="", key="a")
    cli = cli_for(cast.owner)
    shown = cli("notices", "--unread", "--mark-read")
    assert shown.exit_code == 0, shown.output
    assert "failed" in shown.output and "resnet failed" in shown.output
    assert Notice.objects.get().read_at is not None
    assert "No notices." in cli("notices", "--unread").output
    assert cli_for(cast.outsider)("notices").output.strip() == "No notices."


def test_list_searches_the_command_sorts_and_takes_dates(
    cast: Cast, cli_for: Callable[..., Cli]
) -> None:
    common = {"team": cast.team, "owner": cast.owner, "gpu_class": cast.gpu_class}
    WorkloadFactory(**common, image=cast.image, name="b-ft", command=["python", "finetune.py"])
    WorkloadFactory(
        **common, image=cast.image, name="a-old", created_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    cli = cli_for(cast.owner)
    found = json.loads(cli("list", "--search", "finetune", "--json").output)
    assert [w["name"] for w in found] == ["b-ft"]
    by_name = json.loads(cli("list", "--sort", "name", "--json").output)
    assert [w["name"] for w in by_name] == ["a-old", "b-ft"]
    old = json.loads(cli("list", "--until", "2020-12-31", "--json").output)
    assert [w["name"] for w in old] == ["a-old"]
    bad = cli("list", "--since", "yesterday")
    assert bad.exit_code != 0 and "created_from" in bad.output
