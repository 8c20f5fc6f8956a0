"""The proxy's authorisation of endpoint calls, on plain requests: an unknown endpoint looks
exactly like a wrong key, guessing keys is throttled per address and per endpoint (429 with
Retry-After after ENDPOINT_KEY_GUESSES), and a "yes" remembered for GATEWAY_AUTH_CACHE_SECONDS
stops within that time once the key is revoked or the person leaves the team."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.utils import timezone

from apps.accounts.models import Membership
from apps.serving.access import AUTH_CACHE, endpoint_key_create, endpoint_key_revoke
from apps.serving.models import EndpointKey
from apps.workloads import core
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory
from tests.plugins.cast import Cast

pytestmark = pytest.mark.django_db


def cache_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The clock of Django's in-memory caches (when an entry was set, whether it expired), for
    this test only: ``clock[0]`` is the time it reads."""
    clock = [1000.0]
    fake = SimpleNamespace(time=lambda: clock[0])
    monkeypatch.setattr("django.core.cache.backends.base.time", fake)
    monkeypatch.setattr("django.core.cache.backends.locmem.time", fake)
    caches[AUTH_CACHE].clear()
    return clock


def endpoint(cast: Cast) -> Workload:
    workload: Workload = WorkloadFactory.create(
        kind=core.KIND_INFERENCE,
        owner=cast.lead,
        team=cast.team,
        gpu_class=cast.gpu_class,
        image=cast.image,
        state=core.RUNNING,
        priority_class=Workload.Priority.PRODUCTION,
    )
    return workload


def key_for(cast: Cast, workload: Workload) -> str:
    return endpoint_key_create(actor=cast.lead, workload=workload, name="app").plaintext


def call(path: str, *, key: str = "", address: str = "192.0.2.10", **extra: Any) -> Any:
    if key:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return Client(REMOTE_ADDR=address).get(path, **extra)


def test_an_unknown_endpoint_is_answered_as_a_wrong_key_is(cast: Cast) -> None:
    workload = endpoint(cast)
    key = key_for(cast, workload)
    for presented in (key, "gpe_0000_wrong"):
        unknown = call("/endpoints/auth/999999/", key=presented)
        wrong = call(f"/endpoints/auth/{workload.pk}/", key="gpe_0000_wrong")
        assert unknown.status_code == wrong.status_code == 401
        assert unknown.content == wrong.content
        assert unknown["WWW-Authenticate"] == wrong["WWW-Authenticate"]
    # Without a key, and signed in as someone who may not call it: the same answers too.
    assert (
        call("/endpoints/auth/999999/").content == call(f"/endpoints/auth/{workload.pk}/").content
    )
    outsider = Client()
    outsider.force_login(cast.outsider)
    unknown, known = (outsider.get(f"/endpoints/auth/{pk}/") for pk in (999999, workload.pk))
    assert (unknown.status_code, unknown.content) == (known.status_code, known.content)
    assert known.status_code == 403


def test_wrong_keys_from_one_address_are_throttled_with_retry_after(
    cast: Cast, settings: Any
) -> None:
    settings.ENDPOINT_KEY_GUESSES = 3
    settings.ENDPOINT_KEY_GUESS_WINDOW_SECONDS = 60
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    statuses = [call(path, key=f"gpe_0000_guess{i}").status_code for i in range(3)]
    assert statuses == [401, 401, 401]
    refused = call(path, key="gpe_0000_guess3")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    # That address is refused whatever it presents now, a valid key and another endpoint too.
    assert call(path, key=key).status_code == 429
    assert call("/endpoints/auth/999999/", key="gpe_0000_x").status_code == 429
    # Another address still gets in with the key.
    assert call(path, key=key, address="192.0.2.99").status_code == 200


def test_wrong_keys_for_one_endpoint_are_throttled_but_its_keys_still_open_it(
    cast: Cast, settings: Any
) -> None:
    settings.ENDPOINT_KEY_GUESSES = 3
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    # Guesses from many addresses (one each): the endpoint's count runs out.
    statuses = [
        call(path, key=f"gpe_0000_g{i}", address=f"198.51.100.{i}").status_code for i in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    assert call(path, key="gpe_0000_more", address="198.51.100.50").status_code == 429
    # Someone else's guessing never locks the endpoint's callers out.
    assert call(path, key=key, address="198.51.100.60").status_code == 200
    # Another endpoint's count is its own.
    other = endpoint(cast)
    assert (
        call(f"/endpoints/auth/{other.pk}/", key="gpe_0000_g", address="198.51.100.61").status_code
        == 401
    )


def test_a_revoked_key_stops_within_the_cache_time(
    cast: Cast, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.GATEWAY_AUTH_CACHE_SECONDS = 5
    clock = cache_clock(monkeypatch)
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    assert call(path, key=key).status_code == 200
    # Revoked by another web process (this one's memory is not told): remembered a while...
    EndpointKey.objects.filter(endpoint_id=workload.pk).update(revoked_at=timezone.now())
    clock[0] += 4.9
    assert call(path, key=key).status_code == 200
    # ... and no longer than GATEWAY_AUTH_CACHE_SECONDS.
    clock[0] += 0.2
    assert call(path, key=key).status_code == 401


def test_a_key_revoked_here_stops_at_once(cast: Cast, settings: Any) -> None:
    settings.GATEWAY_AUTH_CACHE_SECONDS = 60
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    assert call(path, key=key).status_code == 200
    stored = EndpointKey.objects.get(endpoint_id=workload.pk)
    assert endpoint_key_revoke(actor=cast.lead, workload=workload, key_id=stored.pk)
    assert call(path, key=key).status_code == 401


def test_a_member_who_leaves_stops_within_the_cache_time_and_a_signed_out_one_at_once(
    cast: Cast, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.GATEWAY_AUTH_CACHE_SECONDS = 5
    clock = cache_clock(monkeypatch)
    workload = endpoint(cast)
    path = f"/endpoints/auth/{workload.pk}/"
    member = Client()
    member.force_login(cast.teammate)
    assert member.get(path).status_code == 200
    Membership.objects.filter(user=cast.teammate, team=cast.team).delete()
    assert member.get(path).status_code == 200  # remembered
    clock[0] += 5.1
    assert member.get(path).status_code == 403
    # An ended session is no session: refused at once, whatever was remembered.
    lead = Client()
    lead.force_login(cast.lead)
    assert lead.get(path).status_code == 200
    lead.logout()
    assert lead.get(path).status_code == 401


# --- the remembered "yes", answered before Django (apps/web/views/gateway_hooks.py) ---------


def remembered(path: str, *, key: str = "", address: str = "192.0.2.10", **headers: str) -> Any:
    """What the production server's ASGI application answers from memory for ``path``, before
    Django: ``(status, body)``, or ``None`` when it hands the request on to Django."""
    from apps.web.views.gateway_hooks import endpoint_auth_remembered

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    raw = [(name.replace("_", "-").lower().encode(), v.encode()) for name, v in headers.items()]
    if key:
        raw.append((b"authorization", f"Bearer {key}".encode()))
    scope = {"type": "http", "path": path, "headers": raw, "client": (address, 40000)}
    if not asyncio.run(endpoint_auth_remembered(scope, send)):
        assert sent == []
        return None
    start, body = sent
    return start["status"], body["body"].decode()


def test_a_remembered_yes_is_answered_from_memory_only_for_its_key_and_endpoint(
    cast: Cast, settings: Any
) -> None:
    settings.GATEWAY_AUTH_CACHE_SECONDS = 5
    caches[AUTH_CACHE].clear()
    workload = endpoint(cast)
    other = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    # Not yet decided: Django decides (and remembers its yes).
    assert remembered(path, key=key) is None
    assert call(path, key=key).status_code == 200
    assert remembered(path, key=key) == (200, "ok")
    assert remembered(path, X_Api_Key=key) == (200, "ok")  # the other way to present it
    # Anything else goes on to Django: a wrong key, the key at another endpoint, no key, a
    # session, another path below the hook.
    assert remembered(path, key=key[:-1] + ("x" if key[-1] != "x" else "y")) is None
    assert remembered(f"/endpoints/auth/{other.pk}/", key=key) is None
    assert remembered(path) is None
    assert remembered(path, Cookie="sessionid=abc") is None
    assert remembered(f"{path}extra/", key=key) is None
    # Off: nothing is remembered, everything is decided in full.
    settings.GATEWAY_AUTH_CACHE_SECONDS = 0
    assert remembered(path, key=key) is None


def test_an_address_refused_for_guessing_is_not_answered_from_memory(
    cast: Cast, settings: Any
) -> None:
    settings.GATEWAY_AUTH_CACHE_SECONDS = 60
    settings.ENDPOINT_KEY_GUESSES = 3
    caches[AUTH_CACHE].clear()
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    assert call(path, key=key, address="203.0.113.7").status_code == 200
    assert remembered(path, key=key, address="203.0.113.7") == (200, "ok")
    for i in range(4):
        call(path, key=f"gpe_0000_guess{i}", address="203.0.113.7")
    # Refused whatever it presents, as the full decision says (429), even a remembered key.
    assert remembered(path, key=key, address="203.0.113.7") is None
    assert call(path, key=key, address="203.0.113.7").status_code == 429
    assert remembered(path, key=key, address="203.0.113.8") == (200, "ok")


def test_the_address_read_from_memory_is_the_one_the_trusted_proxies_name(
    cast: Cast, settings: Any
) -> None:
    """An X-Forwarded-For the caller wrote does not move it off its refused address: with
    TRUSTED_PROXY_COUNT=1 the last entry (the one the proxy appended) is the caller."""
    settings.GATEWAY_AUTH_CACHE_SECONDS = 60
    settings.ENDPOINT_KEY_GUESSES = 3
    settings.TRUSTED_PROXY_COUNT = 1
    caches[AUTH_CACHE].clear()
    workload = endpoint(cast)
    key = key_for(cast, workload)
    path = f"/endpoints/auth/{workload.pk}/"
    via = {"HTTP_X_FORWARDED_FOR": "198.18.0.1, 203.0.113.9"}
    assert call(path, key=key, address="10.0.0.2", **via).status_code == 200
    for i in range(4):
        call(path, key=f"gpe_0000_g{i}", address="10.0.0.2", **via)
    forged = {"X_Forwarded_For": "198.18.0.2, 203.0.113.10, 203.0.113.9"}
    assert remembered(path, key=key, address="10.0.0.2", **forged) is None
    fresh = {"X_Forwarded_For": "198.18.0.1, 203.0.113.10"}
    assert remembered(path, key=key, address="10.0.0.2", **fresh) == (200, "ok")
