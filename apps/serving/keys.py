"""What an endpoint key is: how one is made, stored (only its digest) and presented by a call.
Pure.

A key opens one inference endpoint for applications that cannot sign in (``Authorization:
Bearer gpe_…`` or ``X-Api-Key``). It is not a Kubernetes Secret and never reaches the cluster:
the portal checks it for the ingress (``apps.serving.access``).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

ENDPOINT_KEY_PREFIX = "gpe"
MAX_KEY_NAME_LENGTH = 100


@dataclass(frozen=True)
class EndpointKeyMaterial:
    plaintext: str  # shown once, never stored
    lookup: str  # stored and shown: tells keys apart
    digest: str  # stored: what a call's key is compared with


def endpoint_key_generate() -> EndpointKeyMaterial:
    """A new endpoint key ``gpe_<lookup>_<secret>`` (256 bits); only its digest is stored."""
    lookup = secrets.token_hex(4)
    plaintext = f"{ENDPOINT_KEY_PREFIX}_{lookup}_{secrets.token_urlsafe(32)}"
    return EndpointKeyMaterial(plaintext, lookup, endpoint_key_digest(plaintext))


def endpoint_key_digest(plaintext: str) -> str:
    # 256 bits of entropy: an unsalted fast hash makes a leaked table useless and keeps each
    # call to one indexed lookup.
    return hashlib.sha256(plaintext.encode("utf-8", "replace")).hexdigest()


def endpoint_key_name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name.strip():
        return "Name the key (what calls with it, e.g. the application)."
    if len(name) > MAX_KEY_NAME_LENGTH:
        return f"The key's name has {len(name)} characters; at most {MAX_KEY_NAME_LENGTH}."
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "The key's name may not contain control characters."
    return None


def presented_key(authorization: str, api_key_header: str) -> str:
    """The endpoint key a call carries: ``Authorization: Bearer <key>`` or ``X-Api-Key``."""
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip().startswith(f"{ENDPOINT_KEY_PREFIX}_"):
        return value.strip()
    return api_key_header.strip()
