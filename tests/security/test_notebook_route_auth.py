"""The auth address a notebook's Gateway API route calls names the notebook it serves
(``/notebooks/auth/<id>/``, Traefik's forwardAuth): the portal decides on that notebook and
refuses a forwarded URL that names another one, whatever path the client sent; a browser
without access is sent to the sign-in, as the gateway returns the portal's answer as is."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from apps.orchestration import notebook_access as access
from tests.portal.conftest import Portal
from tests.security.test_notebook_access import notebook, notebooks, opened, token_of, url_of

pytestmark = pytest.mark.django_db
__all__ = ["notebooks"]  # the fixture, used by name


def traefik_asks(client: Client, route_id: int, url: str, method: str = "GET") -> Any:
    """What Traefik's forwardAuth sends: a GET to the route's auth address, the request's
    method, proto, host and URI in X-Forwarded-* and the browser's cookies."""
    parts = urlsplit(url)
    uri = parts.path + (f"?{parts.query}" if parts.query else "")
    return client.get(
        f"/notebooks/auth/{route_id}/",
        HTTP_X_FORWARDED_METHOD=method,
        HTTP_X_FORWARDED_PROTO=parts.scheme,
        HTTP_X_FORWARDED_HOST=parts.netloc,
        HTTP_X_FORWARDED_URI=uri,
    )


def test_owner_enters_through_the_route_of_that_notebook(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    location = opened(portal, portal.cast.owner, nb)
    browser = Client()
    first = traefik_asks(browser, nb.pk, location)
    assert first.status_code == 200
    assert first["Authorization"] == f"token {token_of(nb)}"
    assert traefik_asks(browser, nb.pk, url_of(nb) + "lab").status_code == 200


def test_a_forwarded_url_naming_another_notebook_is_refused(
    portal: Portal, notebooks: None
) -> None:
    """The route of notebook B asks with a URL of notebook A (a path the client wrote for A and
    the gateway normalised into B's route): refused, though the cookie is good for A."""
    mine = notebook(portal)
    other = notebook(portal)
    browser = Client()
    assert (
        traefik_asks(browser, mine.pk, opened(portal, portal.cast.owner, mine)).status_code == 200
    )
    refused = traefik_asks(browser, other.pk, url_of(mine) + "lab")
    assert refused.status_code == 403
    assert "Authorization" not in refused
    # And the traversal written out: A's prefix, then up into B's path, on B's route.
    path = f"/notebooks/{mine.team.namespace}/{mine.pk}/../{other.pk}/"
    host = f"wl-{mine.pk}.nb.gpu.example.com"
    refused = traefik_asks(browser, other.pk, f"https://{host}{path}")
    assert refused.status_code == 403 and "Authorization" not in refused


def test_without_access_a_browser_is_sent_to_sign_in_and_a_script_gets_401(
    portal: Portal, notebooks: None
) -> None:
    nb = notebook(portal)
    answer = traefik_asks(Client(), nb.pk, url_of(nb) + "lab")
    assert answer.status_code == 302
    target = urlsplit(answer["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == (
        "https://gpu.example.com/notebooks/signin/"
    )
    assert parse_qs(target.query)["rd"] == [url_of(nb) + "lab"]
    posted = traefik_asks(Client(), nb.pk, url_of(nb) + "api/contents", method="POST")
    assert posted.status_code == 401


def test_a_teammate_is_refused_on_the_route(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    ticket = access.ticket_mint(user=portal.cast.teammate, workload=nb)
    refused = traefik_asks(Client(), nb.pk, f"{url_of(nb)}?gpupaas-ticket={ticket}")
    assert refused.status_code == 403 and "Authorization" not in refused


def test_a_notebook_that_does_not_exist_is_answered_as_someone_elses_is(
    portal: Portal, notebooks: None
) -> None:
    """The team's route for notebook paths that name no notebook asks about notebook 0: a
    browser gets the sign-in, a script 401 and a signed-in person 403, the answers an existing
    notebook gives them, so nothing tells which notebooks exist."""
    nb = notebook(portal)
    known_url = url_of(nb) + "lab"
    unknown_url = known_url.replace(f"/{nb.pk}/", f"/{nb.pk + 1000}/")
    known = traefik_asks(Client(), nb.pk, known_url)
    unknown = traefik_asks(Client(), 0, unknown_url)
    assert known.status_code == unknown.status_code == 302
    for answer, url in ((known, known_url), (unknown, unknown_url)):
        assert parse_qs(urlsplit(answer["Location"]).query)["rd"] == [url]
    posted = [
        traefik_asks(Client(), route, url.replace("lab", "api/contents"), method="POST")
        for route, url in ((nb.pk, known_url), (0, unknown_url))
    ]
    assert {(p.status_code, p.content) for p in posted} == {(401, posted[0].content)}
    outsider = Client()
    outsider.force_login(portal.cast.outsider)
    refused = [traefik_asks(outsider, nb.pk, known_url), traefik_asks(outsider, 0, unknown_url)]
    assert {(r.status_code, r.content) for r in refused} == {(403, refused[0].content)}
    # Even a URL that names an existing notebook, asked on that route, opens nothing.
    owner = Client()
    owner.force_login(portal.cast.owner)
    assert traefik_asks(owner, 0, known_url).status_code == 403
