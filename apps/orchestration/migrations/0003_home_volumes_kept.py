"""Record the home volume every person already has, so that it keeps its name and data.

Before this table, a notebook's claim was named from the owner's username, lower-cased with
punctuation folded to "-": "eve" and "Eve", "alice.smith" and "alice_smith", "bob-2" and
"bob.2" shared one volume. For every (owner, team) that ever had a notebook, in the order of
their first notebook:

- the first person to whom an old name maps keeps it (and the data on it);
- anyone after them whose old name is already taken in that team, or whose old name the API
  server could never have accepted ("home-josé"), gets a new id-keyed claim (``home-u<id>``),
  which starts empty.

People without a notebook get an id-keyed name on their first notebook. Nothing in the
cluster is renamed or deleted here.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

NOTEBOOK = "notebook"
DNS_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")


def legacy_claim(username: str, user_id: int) -> str:
    """The name the earlier scheme gave (apps/orchestration/selectors.py before this)."""
    slug = "".join(c if c.isalnum() else "-" for c in username.lower())
    return f"home-{slug.strip('-')[:50] or user_id}"


def id_claim(user_id: int, attempt: int) -> str:
    return f"home-u{user_id}" if attempt == 0 else f"home-u{user_id}-{attempt}"


def keep_home_volumes(apps: Any, schema_editor: Any) -> None:
    Workload = apps.get_model("workloads", "Workload")
    HomeVolume = apps.get_model("orchestration", "HomeVolume")
    taken: dict[int, set[str]] = {}
    seen: set[tuple[int, int]] = set()
    moved: list[tuple[int, int]] = []
    rows = (
        Workload.objects.filter(kind=NOTEBOOK)
        .order_by("pk")
        .values_list("owner_id", "owner__username", "team_id")
    )
    # First every old name that someone keeps, so that no new name can take one of them.
    for owner_id, username, team_id in rows.iterator():
        if (owner_id, team_id) in seen:
            continue
        seen.add((owner_id, team_id))
        names = taken.setdefault(team_id, set())
        claim = legacy_claim(username or "", owner_id)
        if claim in names or not DNS_LABEL.fullmatch(claim) or len(claim) > 63:
            moved.append((owner_id, team_id))
            continue
        names.add(claim)
        HomeVolume.objects.create(user_id=owner_id, team_id=team_id, claim=claim)
    for owner_id, team_id in moved:
        names = taken[team_id]
        attempt = 0
        while id_claim(owner_id, attempt) in names:
            attempt += 1
        names.add(id_claim(owner_id, attempt))
        HomeVolume.objects.create(
            user_id=owner_id, team_id=team_id, claim=id_claim(owner_id, attempt)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("orchestration", "0002_home_volume"),
        ("workloads", "0006_workload_live_indexes"),
    ]

    operations = [migrations.RunPython(keep_home_volumes, migrations.RunPython.noop)]
