"""The portal's session store: Django's database sessions, refusing a session cookie that
could not be one of its keys before it reaches the database.

Django makes keys of lowercase letters and digits (32 of them). A cookie carrying anything
else — a NUL, which PostgreSQL text cannot hold, or any other character a client made up —
is treated as no session at all (signed out), instead of failing the query with a server
error."""

from __future__ import annotations

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import VALID_KEY_CHARS

_ALLOWED = frozenset(VALID_KEY_CHARS)
MAX_KEY_LENGTH = 40  # the column's length


def well_formed(session_key: str | None) -> bool:
    """Whether ``session_key`` has the shape of a key this store makes."""
    return bool(
        session_key and 8 <= len(session_key) <= MAX_KEY_LENGTH and _ALLOWED.issuperset(session_key)
    )


class SessionStore(db.SessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        return well_formed(key)
