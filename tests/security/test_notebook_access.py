"""Notebooks are opened only through the portal: the ingress asks the portal's auth endpoint
about every request, the owner and admins get in, everyone else is refused, each notebook has
its own origin, and the Jupyter token never appears in a URL or a page."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import signing
from django.test import Client

from apps.orchestration import notebook_access as access
from apps.workloads import core
from apps.workloads.models import Workload
from tests.portal.conftest import Portal

pytestmark = pytest.mark.django_db

WILDCARD = "*.nb.gpu.example.com"
AUTH = "/notebooks/auth/"


def token_of(workload: Workload) -> str:
    return f"jupyter-s3cret-{workload.pk}"


@pytest.fixture
def notebooks(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.NOTEBOOK_WILDCARD_HOST = WILDCARD
    settings.NOTEBOOK_HOST = ""
    settings.PORTAL_URL = "https://gpu.example.com"
    settings.NOTEBOOK_AUTH_URL = "https://gpu.example.com/notebooks/auth/"
    for name in ("notebook_token", "notebook_token_for_ingress"):
        monkeypatch.setattr(f"apps.web.views.notebooks.{name}", token_of)


def notebook(portal: Portal, **kw: Any) -> Workload:
    values: dict[str, Any] = {"kind": "notebook", "state": core.RUNNING}
    values.update(kw)
    workload = portal.workload(image=portal.notebook_image, **values)
    ns = workload.team.namespace
    workload.k8s_objects = [
        {"kind": kind, "name": f"wl-{workload.pk}{suffix}", "namespace": ns}
        for kind, suffix in (("StatefulSet", ""), ("Service", ""), ("Ingress", ""))
    ] + [{"kind": "Secret", "name": f"wl-{workload.pk}-token", "namespace": ns}]
    workload.save(update_fields=["k8s_objects"])
    return workload


def url_of(workload: Workload) -> str:
    return f"https://wl-{workload.pk}.nb.gpu.example.com/notebooks/{workload.team.namespace}/{workload.pk}/"


def ingress_asks(client: Client, url: str) -> Any:
    """The subrequest ingress-nginx makes: the browser's cookies, the original URL."""
    return client.get(AUTH, HTTP_X_ORIGINAL_URL=url)


def opened(portal: Portal, user: Any, workload: Workload) -> str:
    response = portal.client(user).get(f"/workloads/{workload.pk}/open/")
    assert response.status_code == 302, response.status_code
    return str(response["Location"])


def ticket_in(url: str) -> str:
    return parse_qs(urlsplit(url).query)[access.TICKET_PARAM][0]


# --- who gets in ------------------------------------------------------------------------------


def test_owner_enters_with_the_ticket_then_the_cookie(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    location = opened(portal, portal.cast.owner, nb)
    assert location.startswith(url_of(nb) + "?gpupaas-ticket=")
    browser = Client()
    first = ingress_asks(browser, location)
    assert first.status_code == 200
    assert first["Authorization"] == f"token {token_of(nb)}"
    cookie = first.cookies[f"gpupaas-nb-{nb.pk}"]
    assert cookie["httponly"] and cookie["secure"]
    assert cookie["samesite"] == "Lax"
    assert cookie["path"] == "/"
    assert not cookie["domain"]  # host-only: no other notebook's host receives it
    # Later requests carry only the cookie.
    again = ingress_asks(browser, url_of(nb) + "lab/tree")
    assert again.status_code == 200
    assert again["Authorization"] == f"token {token_of(nb)}"


def test_admin_enters_any_notebook(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    location = opened(portal, portal.cast.admin, nb)
    assert ingress_asks(Client(), location).status_code == 200


def test_teammate_and_lead_are_refused(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    for person in (portal.cast.teammate, portal.cast.lead):
        assert portal.client(person).get(f"/workloads/{nb.pk}/open/").status_code == 403
        # Even a ticket minted for them (the portal never does) does not let them in.
        ticket = access.ticket_mint(user=person, workload=nb)
        refused = ingress_asks(Client(), f"{url_of(nb)}?gpupaas-ticket={ticket}")
        assert refused.status_code == 403
        assert "Authorization" not in refused
        # Nor does their portal session, where the portal and the notebook share cookies.
        assert ingress_asks(portal.client(person), url_of(nb)).status_code == 403


def test_outsider_is_refused_and_cannot_learn_the_notebook_exists(
    portal: Portal, notebooks: None
) -> None:
    nb = notebook(portal)
    outsider = portal.client(portal.cast.outsider)
    assert outsider.get(f"/workloads/{nb.pk}/open/").status_code == 404
    assert outsider.get("/notebooks/signin/", {"rd": url_of(nb)}).status_code == 404
    ticket = access.ticket_mint(user=portal.cast.outsider, workload=nb)
    assert ingress_asks(Client(), f"{url_of(nb)}?gpupaas-ticket={ticket}").status_code == 403
    assert ingress_asks(outsider, url_of(nb)).status_code == 403


def test_anonymous_is_sent_to_sign_in(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    refused = ingress_asks(Client(), url_of(nb))
    assert refused.status_code == 401
    assert "Authorization" not in refused
    signin = Client().get("/notebooks/signin/", {"rd": url_of(nb)})
    assert signin.status_code == 302
    assert signin["Location"].startswith("/accounts/login/")


def test_sign_in_sends_the_owner_back_where_they_were_with_a_fresh_ticket(
    portal: Portal, notebooks: None
) -> None:
    nb = notebook(portal)
    deep = url_of(nb) + "lab/tree/work"
    back = portal.client(portal.cast.owner).get("/notebooks/signin/", {"rd": deep})
    assert back.status_code == 302
    assert back["Location"].startswith(deep + "?gpupaas-ticket=")
    assert ingress_asks(Client(), back["Location"]).status_code == 200
    teammate = portal.client(portal.cast.teammate)
    assert teammate.get("/notebooks/signin/", {"rd": deep}).status_code == 403
    elsewhere = portal.client(portal.cast.owner).get(
        "/notebooks/signin/", {"rd": "https://evil.example.com/notebooks/team-x/1/"}
    )
    assert elsewhere.status_code == 404


# --- tickets and cookies ----------------------------------------------------------------------


def test_a_ticket_works_once(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    location = opened(portal, portal.cast.owner, nb)
    assert ingress_asks(Client(), location).status_code == 200
    replayed = ingress_asks(Client(), location)  # from history, a log, another browser
    assert replayed.status_code == 401
    assert "Authorization" not in replayed


def test_an_expired_ticket_is_refused(
    portal: Portal, notebooks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = notebook(portal)
    now = time.time()
    monkeypatch.setattr(signing.time, "time", lambda: now - 120)
    ticket = access.ticket_mint(user=portal.cast.owner, workload=nb)
    monkeypatch.setattr(signing.time, "time", lambda: now)
    assert ingress_asks(Client(), f"{url_of(nb)}?gpupaas-ticket={ticket}").status_code == 401


def test_forged_tickets_and_cookies_are_refused(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    owner = portal.cast.owner
    forged = [
        signing.dumps({"w": nb.pk, "u": owner.pk, "n": "x"}, salt="another-salt"),
        signing.dumps({"w": nb.pk, "u": owner.pk, "n": "x"}, key="not-the-secret-key"),
        access.ticket_mint(user=owner, workload=nb)[:-2] + "xx",
        # A cookie is not a ticket, nor the other way round.
        access.cookie_value(user_id=owner.pk, workload=nb),
    ]
    for ticket in forged:
        assert ingress_asks(Client(), f"{url_of(nb)}?gpupaas-ticket={ticket}").status_code == 401
    browser = Client()
    browser.cookies[f"gpupaas-nb-{nb.pk}"] = access.ticket_mint(user=owner, workload=nb)
    assert ingress_asks(browser, url_of(nb)).status_code == 401
    browser.cookies[f"gpupaas-nb-{nb.pk}"] = signing.dumps(
        {"w": nb.pk, "u": owner.pk, "t": int(time.time())}, salt="gpupaas.notebook.access", key="k"
    )
    assert ingress_asks(browser, url_of(nb)).status_code == 401


def test_ticket_or_cookie_of_one_notebook_does_not_open_another(
    portal: Portal, notebooks: None
) -> None:
    a, b = notebook(portal, name="a"), notebook(portal, name="b")
    location = opened(portal, portal.cast.owner, a)
    ticket = ticket_in(location)
    # A's ticket on B's host.
    assert ingress_asks(Client(), f"{url_of(b)}?gpupaas-ticket={ticket}").status_code == 401
    # A's host name with B's path (a forged original URL) is no notebook at all.
    mixed = f"https://wl-{a.pk}.nb.gpu.example.com/notebooks/{b.team.namespace}/{b.pk}/"
    assert ingress_asks(Client(), mixed).status_code == 403
    browser = Client()
    assert ingress_asks(browser, location).status_code == 200
    a_cookie = browser.cookies[f"gpupaas-nb-{a.pk}"].value
    # A's cookie is named for A; even renamed for B it is refused there.
    assert ingress_asks(browser, url_of(b)).status_code == 401
    thief = Client()
    thief.cookies[f"gpupaas-nb-{b.pk}"] = a_cookie
    assert ingress_asks(thief, url_of(b)).status_code == 401


def test_an_expired_cookie_is_refused_and_a_fresh_one_renewed(
    portal: Portal, notebooks: None, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = notebook(portal)
    owner = portal.cast.owner
    now = time.time()
    monkeypatch.setattr(signing.time, "time", lambda: now - settings.NOTEBOOK_ACCESS_SECONDS - 5)
    stale = access.cookie_value(user_id=owner.pk, workload=nb)
    monkeypatch.setattr(signing.time, "time", lambda: now - settings.NOTEBOOK_ACCESS_SECONDS + 60)
    old = access.cookie_value(user_id=owner.pk, workload=nb)
    monkeypatch.setattr(signing.time, "time", lambda: now)
    browser = Client()
    browser.cookies[f"gpupaas-nb-{nb.pk}"] = stale
    assert ingress_asks(browser, url_of(nb)).status_code == 401
    browser.cookies[f"gpupaas-nb-{nb.pk}"] = old
    renewed = ingress_asks(browser, url_of(nb))
    assert renewed.status_code == 200
    assert f"gpupaas-nb-{nb.pk}" in renewed.cookies


def test_access_is_checked_on_every_request_not_only_at_the_ticket(
    portal: Portal, notebooks: None
) -> None:
    admin = portal.cast.admin
    nb = notebook(portal)
    browser = Client()
    assert ingress_asks(browser, opened(portal, admin, nb)).status_code == 200
    type(admin).objects.filter(pk=admin.pk).update(is_staff=False, is_superuser=False)
    assert ingress_asks(browser, url_of(nb)).status_code == 403
    owner_browser = Client()
    assert ingress_asks(owner_browser, opened(portal, portal.cast.owner, nb)).status_code == 200
    Workload.objects.filter(pk=nb.pk).update(state=core.SUSPENDED)
    assert ingress_asks(owner_browser, url_of(nb)).status_code == 401


def test_shared_host_scopes_the_cookie_to_the_notebook_path(
    portal: Portal, notebooks: None, settings: Any
) -> None:
    settings.NOTEBOOK_WILDCARD_HOST = ""
    settings.NOTEBOOK_HOST = "notebooks.example.com"
    nb = notebook(portal)
    path = f"/notebooks/{nb.team.namespace}/{nb.pk}/"
    location = opened(portal, portal.cast.owner, nb)
    assert location.startswith(f"https://notebooks.example.com{path}?gpupaas-ticket=")
    first = ingress_asks(Client(), location)
    assert first.status_code == 200
    assert first.cookies[f"gpupaas-nb-{nb.pk}"]["path"] == path
    # Another host entirely is not this notebook.
    other = location.replace("notebooks.example.com", "evil.example.com")
    assert ingress_asks(Client(), other).status_code == 403


def test_the_original_url_may_come_as_host_and_uri(portal: Portal, notebooks: None) -> None:
    nb = notebook(portal)
    location = urlsplit(opened(portal, portal.cast.owner, nb))
    answer = Client().get(
        AUTH,
        HTTP_X_FORWARDED_HOST=location.netloc,
        HTTP_X_ORIGINAL_URI=f"{location.path}?{location.query}",
    )
    assert answer.status_code == 200


def test_the_check_answers_whatever_method_the_ingress_asks_with(
    portal: Portal, notebooks: None
) -> None:
    nb = notebook(portal)
    browser = Client(enforce_csrf_checks=True)
    assert ingress_asks(browser, opened(portal, portal.cast.owner, nb)).status_code == 200
    for method in ("post", "put", "delete", "head"):
        answer = getattr(browser, method)(AUTH, HTTP_X_ORIGINAL_URL=url_of(nb))
        assert answer.status_code == 200, method
    assert (
        Client(enforce_csrf_checks=True).post(AUTH, HTTP_X_ORIGINAL_URL=url_of(nb)).status_code
        == 401
    )


# --- the token never leaves the server side --------------------------------------------------


def test_no_url_or_page_the_portal_emits_contains_the_jupyter_token(
    portal: Portal, notebooks: None
) -> None:
    nb = notebook(portal)
    token = token_of(nb)
    owner = portal.client(portal.cast.owner)
    emitted: list[str] = []
    for url in (f"/workloads/{nb.pk}/", f"/workloads/{nb.pk}/status/", "/"):
        page = owner.get(url)
        assert page.status_code == 200, url
        emitted.append(page.content.decode())
    location = opened(portal, portal.cast.owner, nb)
    emitted.append(location)
    signin = owner.get("/notebooks/signin/", {"rd": url_of(nb)})
    emitted.append(signin["Location"])
    auth = ingress_asks(Client(), location)
    assert auth.status_code == 200
    emitted += [auth.content.decode(), str(auth.cookies), auth.get("Location", "")]
    for text in emitted:
        assert token not in text
    # Only the header ingress-nginx hands to Jupyter upstream (auth-response-headers) has it.
    assert auth["Authorization"] == f"token {token}"
    assert "no-store" in auth["Cache-Control"]
    # And a suspended notebook's page explains, without the token.
    Workload.objects.filter(pk=nb.pk).update(state=core.SUSPENDED)
    page = owner.get(f"/workloads/{nb.pk}/open/").content.decode()
    assert "not running" in page and token not in page
