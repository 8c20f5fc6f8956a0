"""Pytest plugin: a real OpenID Connect provider (deploy/oidc-provider) on loopback.

Fixtures
--------
``oidc_provider`` (session)
    Starts ``node deploy/oidc-provider/server.js`` on a free 127.0.0.1 port with a config
    file written from ``oidc_provider_config`` and returns an :class:`OIDCProvider`
    (issuer, endpoints from discovery, clients, users, small helpers). Runs ``npm ci`` first
    when ``node_modules`` is missing, under a file lock so pytest-xdist workers do not race.
    Each xdist worker gets its own provider process.

``oidc_provider_config`` (session)
    The config dict the provider starts with (see :func:`default_test_config`). Override it
    in a ``conftest.py`` to add clients or users.

Clients in the default test config
----------------------------------
``gpupaas-test``  redirect URIs ``http://testserver/oidc/callback/`` (Django test client) and
                  ``http://127.0.0.1/oidc/callback/`` / ``http://localhost/oidc/callback/`` on
                  ANY port (loopback rule, for live servers on random ports).
``gpupaas-other`` the same redirect URIs, different id/secret: wrong-audience tests.
``gpupaas-short`` like ``gpupaas-test`` but ID tokens live only ``SHORT_ID_TOKEN_TTL`` s.
Other redirect URIs: ``oidc_provider.register_client([...])`` (dynamic registration).

Users
-----
Besides the dev users, ``paula`` (groups as full paths), ``nina`` (short names), ``stan``
(one group as a plain string), ``abby`` (no groups claim at all), ``conny`` (only in a nested
group named like the admin group), ``lena`` (a team's lead group) and ``mo`` (a vision member
for tests that change a user at the provider with :meth:`OIDCProvider.set_user`; restore
with ``reset_user``).

Helper
------
:func:`login_via_provider` drives the provider's login form with ``requests`` and returns
the redirect to the relying party's callback (``?code=...&state=...``) without fetching it.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
PROVIDER_DIR = REPO_ROOT / "deploy" / "oidc-provider"
SERVER_JS = PROVIDER_DIR / "server.js"

TEST_CLIENT_ID = "gpupaas-test"
OTHER_CLIENT_ID = "gpupaas-other"
SHORT_CLIENT_ID = "gpupaas-short"
SHORT_ID_TOKEN_TTL = 2
DEFAULT_SCOPE = "openid email profile groups"
TESTSERVER_CALLBACK = "http://testserver/oidc/callback/"
# mozilla-django-oidc sends client_id/client_secret in the token request body.
DEFAULT_AUTH_METHOD = "client_secret_post"

NPM_CI_TIMEOUT = 300.0
STARTUP_TIMEOUT = 30.0

_LOOPBACK_CALLBACKS = [
    "http://127.0.0.1/oidc/callback/",
    "http://localhost/oidc/callback/",
]
_POST_LOGOUT_URIS = [
    f"http://{host}{path}"
    for host in ("testserver", "127.0.0.1", "localhost")
    for path in ("/", "/accounts/logged-out/")
]

_USERS: list[dict[str, Any]] = [
    {"username": "alice", "name": "Alice Archer", "groups": ["gpupaas-team-vision"]},
    {
        "username": "bob",
        "name": "Bob Baker",
        "groups": ["gpupaas-team-vision", "gpupaas-team-nlp"],
    },
    {"username": "carol", "name": "Carol Clark", "groups": ["gpupaas-team-nlp"]},
    {"username": "dave", "name": "Dave Dunn", "groups": []},
    {"username": "admin", "name": "Platform Admin", "groups": ["gpupaas-admins"]},
    {
        "username": "eve",
        "name": "Eve Evans",
        "groups": ["gpupaas-team-vision", "gpupaas-team-nlp"],
    },
    {"username": "nobody", "name": "No Body", "groups": []},
    {"username": "paula", "name": "Paula Path", "groups": ["/ml/vision", "/gpupaas-admins"]},
    {"username": "nina", "name": "Nina Name", "groups": ["vision", "gpupaas-admins"]},
    {"username": "stan", "name": "Stan String", "groups": "/ml/vision"},
    {"username": "abby", "name": "Abby Absent", "groups": None},
    {
        "username": "conny",
        "name": "Conny Contractor",
        "groups": ["/contractors/platform-admins", "/contractors/vision"],
    },
    {"username": "lena", "name": "Lena Lead", "groups": ["gpupaas-team-vision-leads"]},
    {"username": "mo", "name": "Mo Mutable", "groups": ["gpupaas-team-vision"]},
]
# The groups each user starts with, for ``OIDCProvider.reset_user``.
INITIAL_GROUPS: dict[str, list[str] | str | None] = {u["username"]: u["groups"] for u in _USERS}


def _test_client(client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_secret": f"{client_id}-secret",
        "client_name": client_id,
        "redirect_uris": [TESTSERVER_CALLBACK, *_LOOPBACK_CALLBACKS],
        "post_logout_redirect_uris": list(_POST_LOGOUT_URIS),
        "token_endpoint_auth_method": DEFAULT_AUTH_METHOD,
        "loopback_any_port": True,
        **extra,
    }


def default_test_config() -> dict[str, Any]:
    """The provider config used by ``oidc_provider`` unless ``oidc_provider_config`` is
    overridden. Passwords are ``<username>-password``; subjects are ``u-<username>``."""
    return {
        "id_token_ttl": 3600,
        "access_token_ttl": 3600,
        "dynamic_registration": True,
        "control_api": True,
        "clients": [
            _test_client(TEST_CLIENT_ID),
            _test_client(OTHER_CLIENT_ID),
            _test_client(SHORT_CLIENT_ID, id_token_ttl=SHORT_ID_TOKEN_TTL),
        ],
        "users": [
            {
                **user,
                "password": f"{user['username']}-password",
                "sub": f"u-{user['username']}",
                "email": f"{user['username']}@example.com",
                "email_verified": True,
            }
            for user in _USERS
        ],
    }


@dataclass(frozen=True)
class OIDCClient:
    client_id: str
    client_secret: str
    redirect_uris: list[str]
    post_logout_redirect_uris: list[str] = field(default_factory=list)
    token_endpoint_auth_method: str = DEFAULT_AUTH_METHOD


@dataclass(frozen=True)
class OIDCUser:
    username: str
    password: str
    sub: str
    email: str
    name: str
    groups: list[str] | str | None


class OIDCLoginError(AssertionError):
    """The provider did not hand back a redirect to the relying party."""


@dataclass
class OIDCProvider:
    """A running provider process. Endpoints come from its discovery document."""

    issuer: str
    port: int
    discovery: dict[str, Any]
    clients: dict[str, OIDCClient]
    users: dict[str, OIDCUser]
    config_path: Path
    log_path: Path

    @property
    def authorization_endpoint(self) -> str:
        return str(self.discovery["authorization_endpoint"])

    @property
    def token_endpoint(self) -> str:
        return str(self.discovery["token_endpoint"])

    @property
    def userinfo_endpoint(self) -> str:
        return str(self.discovery["userinfo_endpoint"])

    @property
    def jwks_uri(self) -> str:
        return str(self.discovery["jwks_uri"])

    @property
    def end_session_endpoint(self) -> str:
        return str(self.discovery["end_session_endpoint"])

    @property
    def registration_endpoint(self) -> str | None:
        value = self.discovery.get("registration_endpoint")
        return None if value is None else str(value)

    def client(self, client_id: str = TEST_CLIENT_ID) -> OIDCClient:
        return self.clients[client_id]

    def user(self, username: str) -> OIDCUser:
        return self.users[username]

    def authorize_url(
        self,
        *,
        client_id: str = TEST_CLIENT_ID,
        redirect_uri: str = TESTSERVER_CALLBACK,
        state: str = "test-state",
        nonce: str | None = "test-nonce",
        scope: str = DEFAULT_SCOPE,
        **extra: str,
    ) -> str:
        """An authorization-code request URL (for tests that play the relying party)."""
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "scope": scope,
            "state": state,
            **extra,
        }
        if nonce is not None:
            params["nonce"] = nonce
        return f"{self.authorization_endpoint}?{urlencode(params)}"

    def exchange_code(
        self,
        code: str,
        *,
        client_id: str = TEST_CLIENT_ID,
        redirect_uri: str = TESTSERVER_CALLBACK,
        basic_auth: bool = False,
        timeout: float = 10.0,
    ) -> requests.Response:
        """POST the code to the token endpoint; returns the raw response."""
        client = self.clients[client_id]
        data = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri}
        if basic_auth:
            return requests.post(
                self.token_endpoint,
                data=data,
                auth=(client.client_id, client.client_secret),
                timeout=timeout,
            )
        data |= {"client_id": client.client_id, "client_secret": client.client_secret}
        return requests.post(self.token_endpoint, data=data, timeout=timeout)

    def register_client(
        self,
        redirect_uris: list[str],
        *,
        post_logout_redirect_uris: list[str] | None = None,
        token_endpoint_auth_method: str = DEFAULT_AUTH_METHOD,
        timeout: float = 10.0,
        **extra: Any,
    ) -> OIDCClient:
        """Register a one-off client (random id and secret) for exact redirect URIs; ``extra``
        is more client metadata (``backchannel_logout_uri``, ``grant_types``, …)."""
        if self.registration_endpoint is None:
            raise RuntimeError("dynamic registration is off in this provider's config")
        metadata: dict[str, Any] = {
            "redirect_uris": redirect_uris,
            "response_types": ["code"],
            "grant_types": ["authorization_code"],
            "token_endpoint_auth_method": token_endpoint_auth_method,
            **extra,
        }
        if post_logout_redirect_uris:
            metadata["post_logout_redirect_uris"] = post_logout_redirect_uris
        response = requests.post(self.registration_endpoint, json=metadata, timeout=timeout)
        response.raise_for_status()
        body = response.json()
        client = OIDCClient(
            client_id=body["client_id"],
            client_secret=body["client_secret"],
            redirect_uris=list(body["redirect_uris"]),
            post_logout_redirect_uris=list(body.get("post_logout_redirect_uris", [])),
            token_endpoint_auth_method=body["token_endpoint_auth_method"],
        )
        self.clients[client.client_id] = client
        return client

    def set_user(
        self, username: str, *, timeout: float = 10.0, **change: list[str] | str | bool | None
    ) -> None:
        """Change a user while the provider runs: ``groups=`` (a list, a string, or None for no
        claim) and ``disabled=``. Needs ``control_api`` in the config."""
        response = requests.post(
            f"{self.issuer}/_control/users/{username}", json=change, timeout=timeout
        )
        response.raise_for_status()

    def end_all_sessions(self, *, timeout: float = 10.0) -> int:
        """Every login session at the provider ends, without a logout token to anyone (Keycloak's
        realm action "Sign out all active sessions"); how many ended. Needs ``control_api``."""
        response = requests.post(f"{self.issuer}/_control/sessions/end-all", timeout=timeout)
        response.raise_for_status()
        return int(response.json()["sessions_ended"])

    def reset_user(self, username: str) -> None:
        """Back to the groups of the test config, enabled."""
        self.set_user(username, groups=INITIAL_GROUPS.get(username, []), disabled=False)

    def django_settings(self, client_id: str = TEST_CLIENT_ID) -> dict[str, Any]:
        """Settings for mozilla-django-oidc pointing at this provider (for ``override_settings``
        or pytest-django's ``settings`` fixture)."""
        client = self.clients[client_id]
        return {
            "OIDC_RP_CLIENT_ID": client.client_id,
            "OIDC_RP_CLIENT_SECRET": client.client_secret,
            "OIDC_RP_SIGN_ALGO": "RS256",
            "OIDC_RP_SCOPES": DEFAULT_SCOPE,
            "OIDC_OP_ISSUER": self.issuer,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": self.authorization_endpoint,
            "OIDC_OP_TOKEN_ENDPOINT": self.token_endpoint,
            "OIDC_OP_USER_ENDPOINT": self.userinfo_endpoint,
            "OIDC_OP_JWKS_ENDPOINT": self.jwks_uri,
            "OIDC_OP_LOGOUT_ENDPOINT": self.end_session_endpoint,
        }


# --- login helper -----------------------------------------------------------------------


class _FormParser(HTMLParser):
    """Collects forms (action, method, named inputs) and the text of role="alert" elements."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.alerts: list[str] = []
        self._alert_tag: str | None = None
        self._alert_text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.forms.append(
                {
                    "action": attributes.get("action", ""),
                    "method": attributes.get("method", "get").upper(),
                    "fields": {},
                }
            )
        elif tag == "input" and self.forms and attributes.get("name"):
            self.forms[-1]["fields"][attributes["name"]] = attributes.get("value", "")
        if attributes.get("role") == "alert" and self._alert_tag is None:
            self._alert_tag = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._alert_tag:
            self.alerts.append("".join(self._alert_text).strip())
            self._alert_tag = None
            self._alert_text = []

    def handle_data(self, data: str) -> None:
        if self._alert_tag is not None:
            self._alert_text.append(data)


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def login_via_provider(
    authorize_url: str,
    username: str,
    password: str,
    *,
    session: requests.Session | None = None,
    timeout: float = 10.0,
) -> str:
    """Follow ``authorize_url`` at the provider, sign in as ``username`` and return the URL the
    provider redirects to at the relying party (its callback with ``code`` and ``state``, or
    ``error``), without requesting it.

    Cookies are kept in ``session`` (a fresh one when not given); pass the same session again
    to reuse the provider's single sign-on (no form is shown then). Raises
    :class:`OIDCLoginError` when the login is refused (the error text is in the message) or
    the provider answers with anything else than a redirect or its login form.
    """
    http = session if session is not None else requests.Session()
    provider = _origin(authorize_url)
    method, url, data = "GET", authorize_url, None
    submitted = False
    for _ in range(20):
        response = http.request(method, url, data=data, allow_redirects=False, timeout=timeout)
        if response.status_code in (301, 302, 303, 307, 308):
            location = urljoin(response.url, response.headers["Location"])
            if _origin(location) != provider:
                return location
            if response.status_code not in (307, 308):
                method, data = "GET", None
            url = location
            continue
        parser = _FormParser()
        parser.feed(response.text)
        login_forms = [
            form for form in parser.forms if {"login", "password"} <= form["fields"].keys()
        ]
        if response.status_code == 200 and login_forms:
            if submitted:
                reason = "; ".join(parser.alerts) or "login form shown again"
                raise OIDCLoginError(f"provider refused login for {username!r}: {reason}")
            form = login_forms[0]
            method = form["method"]
            url = urljoin(response.url, form["action"])
            data = {**form["fields"], "login": username, "password": password}
            submitted = True
            continue
        raise OIDCLoginError(
            f"unexpected {response.status_code} from {url}: {response.text[:1000]}"
        )
    raise OIDCLoginError(f"too many redirects at the provider starting from {authorize_url}")


def callback_params(callback_url: str) -> dict[str, str]:
    """Query parameters of a callback URL returned by :func:`login_via_provider`."""
    return {key: values[0] for key, values in parse_qs(urlsplit(callback_url).query).items()}


# --- process management -----------------------------------------------------------------


def _require_executable(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"`{name}` (Node.js 20+) was not found on PATH; it is needed to run the OpenID "
            f"provider in {PROVIDER_DIR.relative_to(REPO_ROOT)} for tests marked oidc.",
            pytrace=False,
        )
    return path


def _node_modules_ready() -> bool:
    return (PROVIDER_DIR / "node_modules" / "oidc-provider" / "package.json").is_file()


def ensure_node_modules() -> None:
    """Run ``npm ci`` in deploy/oidc-provider once, if ``node_modules`` is missing."""
    if _node_modules_ready():
        return
    npm = _require_executable("npm")
    lock_path = Path(tempfile.gettempdir()) / "gpupaas-oidc-provider-npm-ci.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _node_modules_ready():
                return
            result = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=PROVIDER_DIR,
                capture_output=True,
                text=True,
                timeout=NPM_CI_TIMEOUT,
                check=False,
            )
            if result.returncode != 0:
                pytest.fail(
                    f"npm ci in {PROVIDER_DIR} failed ({result.returncode}):\n"
                    f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}",
                    pytrace=False,
                )
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _log_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-3000:]
    except OSError:
        return ""


@contextlib.contextmanager
def run_provider(config: dict[str, Any], workdir: Path) -> Iterator[OIDCProvider]:
    """Start the provider with ``config`` (files go to ``workdir``); stop it on exit."""
    node = _require_executable("node")
    ensure_node_modules()
    config_path = workdir / "oidc-config.json"
    port_file = workdir / "oidc-port.json"
    log_path = workdir / "oidc-provider.log"
    config_path.write_text(json.dumps(config, indent=2))
    port_file.unlink(missing_ok=True)

    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                node,
                str(SERVER_JS),
                "--port",
                "0",
                "--config",
                str(config_path),
                "--port-file",
                str(port_file),
            ],
            cwd=PROVIDER_DIR,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "NODE_ENV": "development"},
        )
    try:
        provider = _wait_until_ready(process, config, config_path, port_file, log_path)
        yield provider
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_until_ready(
    process: subprocess.Popen[bytes],
    config: dict[str, Any],
    config_path: Path,
    port_file: Path,
    log_path: Path,
) -> OIDCProvider:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    announcement: dict[str, Any] | None = None
    discovery: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"OpenID provider exited with {process.returncode}:\n{_log_tail(log_path)}",
                pytrace=False,
            )
        if announcement is None and port_file.is_file():
            announcement = json.loads(port_file.read_text())
        if announcement is not None:
            url = f"{announcement['issuer']}/.well-known/openid-configuration"
            with contextlib.suppress(requests.RequestException):
                response = requests.get(url, timeout=2)
                if response.status_code == 200:
                    discovery = response.json()
                    break
        time.sleep(0.05)
    if announcement is None or discovery is None:
        pytest.fail(
            f"OpenID provider not ready after {STARTUP_TIMEOUT:.0f}s:\n{_log_tail(log_path)}",
            pytrace=False,
        )
    clients = {
        entry["client_id"]: OIDCClient(
            client_id=entry["client_id"],
            client_secret=entry.get("client_secret", ""),
            redirect_uris=list(entry["redirect_uris"]),
            post_logout_redirect_uris=list(entry.get("post_logout_redirect_uris", [])),
            token_endpoint_auth_method=entry.get(
                "token_endpoint_auth_method", "client_secret_basic"
            ),
        )
        for entry in config["clients"]
    }
    users = {
        entry["username"]: OIDCUser(
            username=entry["username"],
            password=entry["password"],
            sub=str(entry.get("sub", entry["username"])),
            email=entry.get("email", ""),
            name=entry.get("name", entry["username"]),
            groups=entry.get("groups", []),
        )
        for entry in config["users"]
    }
    return OIDCProvider(
        issuer=str(announcement["issuer"]),
        port=int(announcement["port"]),
        discovery=discovery,
        clients=clients,
        users=users,
        config_path=config_path,
        log_path=log_path,
    )


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def oidc_provider_config() -> dict[str, Any]:
    """Config the session's provider starts with; override in a conftest to extend."""
    return default_test_config()


@pytest.fixture(scope="session")
def oidc_provider(
    oidc_provider_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OIDCProvider]:
    """A running OpenID provider for the whole session (one per xdist worker)."""
    workdir = tmp_path_factory.mktemp("oidc-provider")
    with run_provider(copy.deepcopy(oidc_provider_config), workdir) as provider:
        yield provider
