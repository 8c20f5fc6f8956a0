"""The one adapter that talks to a Kubernetes API.

Rules (CONVENTIONS.md): 409 on create means "already there" only when the existing object
carries our labels — a foreign object is never adopted, patched or deleted; 404 on delete
means "already gone"; conflicts re-read and retry; 5xx, 429 and network errors back off and
retry; every retry goes through :func:`with_backoff`, which also turns whatever the client
raises into the family of :mod:`apps.orchestration.errors`. API clients are made here only.
"""

from __future__ import annotations

import codecs
import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from apps.orchestration.errors import (
    ClusterConfigError,
    ClusterObjectNotFound,
    ClusterRefused,
    ClusterUnreachable,
    cluster_error,
    server_message,
)
from apps.orchestration.manifests import LABEL_MANAGED_BY, LABEL_WORKLOAD, MANAGED_BY, Manifest

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    urllib3.exceptions.HTTPError,
    ConnectionError,
    TimeoutError,
)


class WatchExpired(ClusterRefused):
    """410 Gone: the resourceVersion a watch asked for is older than the server keeps; the
    caller lists again and watches from the list's version."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=410, reason="Expired")


# Collection paths of the kinds we follow with list + watch (all namespaces).
COLLECTION_PATHS = {
    ("v1", "Pod"): "/api/v1/pods",
    ("v1", "Node"): "/api/v1/nodes",
    ("batch/v1", "Job"): "/apis/batch/v1/jobs",
}


class ForeignObjectError(ClusterRefused):
    """An object with our name exists but is not ours: we leave it alone and say so."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=409, reason="AlreadyExists")


# --- a deadline for the cluster calls of one portal page or API call ----------------------------

# When set (monotonic seconds), the moment by which the cluster calls of the current context must
# have answered: every HTTP request's timeouts and every retry are bounded by what is left.
_deadline: ContextVar[float | None] = ContextVar("cluster_deadline", default=None)


@contextmanager
def answer_within(seconds: float) -> Iterator[None]:
    """Cluster calls made inside give up once ``seconds`` have passed, in all, and come out as
    :class:`ClusterUnreachable`: a person waiting for a page or an API call hears that the
    cluster cannot be reached instead of waiting for the workers' retries, or for ever on an
    API server that accepts connections and never answers. Calls outside (the workers, the
    watch) keep their own timeouts and retries."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def time_left() -> float | None:
    """Seconds left of the current :func:`answer_within`; None outside one."""
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def bounded_timeout(given: Any) -> Any:
    """The ``_request_timeout`` one HTTP request gets: the caller's (a number, or a pair
    ``(connect, read)`` whose read None keeps a quiet stream open), each part cut to what is
    left of the deadline. A float becomes a pair: the client ignores a bare float."""
    if isinstance(given, float):
        given = (given, given)
    left = time_left()
    if left is None:
        return given
    if left <= 0:
        raise TimeoutError("the cluster did not answer in the time a request is given")
    if not given:
        return (left, left)
    if isinstance(given, tuple):
        connect, read = given
        return (min(connect or left, left), None if read is None else min(read, left))
    return (min(given, left), min(given, left))


class BoundedRESTClient(rest.RESTClientObject):
    """The client's HTTP layer, each request's timeouts bounded by :func:`bounded_timeout`."""

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        kwargs["_request_timeout"] = bounded_timeout(kwargs.get("_request_timeout"))
        return super().request(method, url, *args, **kwargs)


def api_client_from_config(*, kubeconfig: str | None, context: str | None = None) -> k8s.ApiClient:
    """An API client from a kubeconfig file, or from the pod's service account when
    ``kubeconfig`` is None. It fails fast when the API server is gone: :func:`with_backoff`
    does the retrying."""
    configuration = k8s.Configuration()
    try:
        if kubeconfig is None:
            k8s_config.load_incluster_config(client_configuration=configuration)
        else:
            k8s_config.load_kube_config(
                config_file=kubeconfig, context=context or None, client_configuration=configuration
            )
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise ClusterConfigError(str(exc)) from exc
    configuration.retries = 0
    api_client = k8s.ApiClient(configuration)
    api_client.rest_client = BoundedRESTClient(configuration)
    return api_client


@dataclass(frozen=True)
class Backoff:
    attempts: int = 5
    base_seconds: float = 0.2
    max_seconds: float = 5.0


DEFAULT_BACKOFF = Backoff()


def with_backoff(fn: Callable[[], T], *, what: str, backoff: Backoff = DEFAULT_BACKOFF) -> T:
    """Call ``fn``; retry 5xx, 429 and network errors with jittered exponential backoff.

    What the client raises comes out as the family of :mod:`apps.orchestration.errors`:
    :class:`ClusterUnreachable` once the retries are spent, :class:`ClusterObjectNotFound`
    for a 404, :class:`ClusterRefused` (with the API server's message) for other refusals.
    Inside :func:`answer_within` no retry starts that would end after the deadline.
    """
    for attempt in range(1, backoff.attempts + 1):
        try:
            return fn()
        except NETWORK_ERRORS as exc:
            error: BaseException = exc
        except ApiException as exc:
            if exc.status not in RETRY_STATUSES:
                raise cluster_error(exc, what=what) from exc
            error = exc
        delay = min(backoff.max_seconds, backoff.base_seconds * 2 ** (attempt - 1))
        delay *= 0.5 + random.random() / 2  # noqa: S311 - jitter, not security
        left = time_left()
        if attempt == backoff.attempts or (left is not None and left <= delay):
            raise cluster_error(error, what=what) from error
        time.sleep(delay)
    raise AssertionError("unreachable")


def is_ours(obj: Mapping[str, Any], workload_id: int | None = None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(LABEL_MANAGED_BY) != MANAGED_BY:
        return False
    return workload_id is None or labels.get(LABEL_WORKLOAD) == str(workload_id)


def is_subset(desired: Any, current: Any) -> bool:
    """Whether everything ``desired`` says is already true of ``current`` (defaults aside)."""
    if isinstance(desired, Mapping):
        return isinstance(current, Mapping) and all(
            k in current and is_subset(v, current[k]) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(current, list)
            and len(desired) == len(current)
            and all(is_subset(d, c) for d, c in zip(desired, current, strict=True))
        )
    return bool(desired == current or str(desired) == str(current))


@dataclass(frozen=True)
class Applied:
    kind: str
    namespace: str
    name: str
    created: bool
    patched: bool

    def ref(self) -> dict[str, str]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}


# Kinds whose spec cannot change after creation: an existing one is left as it is.
IMMUTABLE_KINDS = frozenset({"Job", "PersistentVolumeClaim", "Secret"})
# Kinds whose whole ``spec.hard`` we own: a limit we no longer set must disappear, which a
# merge patch never does (it only adds and changes keys), so these are replaced whole.
OWNED_LIMIT_KINDS = frozenset({"ResourceQuota"})
# Kinds whose whole pod template we own: a rollback drops annotations and variables that a
# merge patch would leave behind, so a changed one is replaced whole too.
OWNED_TEMPLATE_KINDS = frozenset({"Deployment"})


def has_stale_limits(desired: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``current`` carries a ``spec.hard`` key that ``desired`` no longer sets."""
    want = (desired.get("spec") or {}).get("hard") or {}
    have = (current.get("spec") or {}).get("hard") or {}
    return bool(set(have) - set(want))


class Kube:
    """A cluster's API, through the dynamic client (one discovery per process and cluster)."""

    def __init__(self, api_client: k8s.ApiClient, *, backoff: Backoff = DEFAULT_BACKOFF) -> None:
        self.api_client = api_client
        self.backoff = backoff
        self._dynamic: DynamicClient | None = None

    @property
    def dynamic(self) -> DynamicClient:
        if self._dynamic is None:
            self._dynamic = with_backoff(
                lambda: DynamicClient(self.api_client), what="API discovery", backoff=self.backoff
            )
        return self._dynamic

    @cached_property
    def core(self) -> k8s.CoreV1Api:
        """The typed core API, for what the dynamic client does not stream (container logs)."""
        return k8s.CoreV1Api(self.api_client)

    def resource(self, api_version: str, kind: str) -> Any:
        # A kind missing from the cache makes the client read discovery again: an API call.
        return self._call(
            lambda: self.dynamic.resources.get(api_version=api_version, kind=kind),
            f"discover {api_version} {kind}",
        )

    def _call(self, fn: Callable[[], T], what: str) -> T:
        return with_backoff(fn, what=what, backoff=self.backoff)

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        res = self.resource(api_version, kind)
        try:
            obj = self._call(lambda: res.get(name=name, namespace=namespace), f"get {kind} {name}")
        except ClusterObjectNotFound:
            return None
        return dict(obj.to_dict())

    def apply(self, manifest: Manifest, *, workload_id: int | None = None) -> Applied:
        """Create the object if absent; patch it if it is ours and differs; never touch others'."""
        api_version, kind = manifest["apiVersion"], manifest["kind"]
        meta = manifest["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        res = self.resource(api_version, kind)
        what = f"{kind} {namespace + '/' if namespace else ''}{name}"
        for _ in range(5):
            try:
                self._call(lambda: res.create(body=manifest, namespace=namespace), f"create {what}")
                return Applied(kind, namespace or "", name, created=True, patched=False)
            except ClusterRefused as exc:
                if exc.status != 409:
                    raise
            current = self.get(api_version, kind, name, namespace)
            if current is None:
                continue  # deleted between our create and our read: create again
            if not is_ours(current, workload_id):
                raise ForeignObjectError(
                    f"{what} exists and is not managed by gpupaas for this workload; left alone."
                )
            stale = kind in OWNED_LIMIT_KINDS and has_stale_limits(manifest, current)
            if kind in IMMUTABLE_KINDS or (is_subset(manifest, current) and not stale):
                return Applied(kind, namespace or "", name, created=False, patched=False)
            body = {k: v for k, v in manifest.items() if k not in {"status"}}
            body["metadata"] = {
                **meta,
                "resourceVersion": current["metadata"]["resourceVersion"],
            }
            try:
                if kind in OWNED_LIMIT_KINDS or kind in OWNED_TEMPLATE_KINDS:
                    self._call(
                        lambda body=body: res.replace(  # type: ignore[misc]
                            body=body, name=name, namespace=namespace
                        ),
                        f"replace {what}",
                    )
                else:
                    self._call(
                        lambda body=body: res.patch(  # type: ignore[misc]
                            body=body,
                            name=name,
                            namespace=namespace,
                            content_type="application/merge-patch+json",
                        ),
                        f"patch {what}",
                    )
                return Applied(kind, namespace or "", name, created=False, patched=True)
            except ClusterRefused as exc:
                if exc.status != 409:
                    raise
                # someone changed it meanwhile: re-read and try again
        raise ClusterUnreachable(f"{what} kept changing under us; will retry on the next pass.")

    def dry_run(self, manifest: Manifest) -> dict[str, Any]:
        """Ask the API server whether it would create the object (``dryRun=All``: validation
        and admission run, nothing is stored). A refusal raises :class:`ClusterRefused` with
        the server's message; an object of that name already there is no refusal."""
        api_version, kind = manifest["apiVersion"], manifest["kind"]
        meta = manifest["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        res = self.resource(api_version, kind)
        try:
            obj = self._call(
                lambda: res.create(body=manifest, namespace=namespace, dry_run="All"),
                f"dry-run create {kind} {name}",
            )
        except ClusterRefused as exc:
            if exc.status != 409:
                raise
            return dict(manifest)
        return dict(obj.to_dict())

    def put(self, manifest: Manifest) -> Applied:
        """Create the object, or replace ours whole (a Secret's new values); never others'."""
        api_version, kind = manifest["apiVersion"], manifest["kind"]
        meta = manifest["metadata"]
        name, namespace = meta["name"], meta.get("namespace")
        res = self.resource(api_version, kind)
        what = f"{kind} {namespace + '/' if namespace else ''}{name}"
        for _ in range(5):
            try:
                self._call(lambda: res.create(body=manifest, namespace=namespace), f"create {what}")
                return Applied(kind, namespace or "", name, created=True, patched=False)
            except ClusterRefused as exc:
                if exc.status != 409:
                    raise
            current = self.get(api_version, kind, name, namespace)
            if current is None:
                continue
            if not is_ours(current):
                raise ForeignObjectError(
                    f"{what} exists and is not managed by gpupaas; left alone."
                )
            body = {
                **manifest,
                "metadata": {**meta, "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            try:
                self._call(
                    lambda body=body: res.replace(  # type: ignore[misc]
                        body=body, name=name, namespace=namespace
                    ),
                    f"replace {what}",
                )
                return Applied(kind, namespace or "", name, created=False, patched=True)
            except ClusterRefused as exc:
                if exc.status != 409:
                    raise
        raise ClusterUnreachable(f"{what} kept changing under us; try again.")

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None,
        *,
        workload_id: int | None = None,
    ) -> bool:
        """Delete our object with background propagation. False if it was already gone."""
        current = self.get(api_version, kind, name, namespace)
        if current is None:
            return False
        if not is_ours(current, workload_id):
            raise ForeignObjectError(f"{kind} {namespace}/{name} is not ours; not deleting it.")
        res = self.resource(api_version, kind)
        try:
            self._call(
                lambda: res.delete(
                    name=name,
                    namespace=namespace,
                    body={
                        "propagationPolicy": "Background",
                        "preconditions": {"uid": current["metadata"]["uid"]},
                    },
                ),
                f"delete {kind} {name}",
            )
        except ClusterObjectNotFound:
            return False
        except ClusterRefused as exc:
            if exc.status != 409:
                raise
            return False  # a new object took the name (UID precondition): not the one we meant
        return True

    def list_objects(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        """Objects of a kind as plain dicts (the API server's JSON), in one list call; none of
        a kind the server does not serve."""
        try:
            res = self.resource(api_version, kind)
        except ResourceNotFoundError:
            return []
        selectors = {
            key: value
            for key, value in (
                ("label_selector", label_selector),
                ("field_selector", field_selector),
            )
            if value is not None
        }
        try:
            result = self._call(
                lambda: res.get(namespace=namespace, **selectors),
                f"list {kind}",
            )
        except ResourceNotFoundError:
            return []
        return [dict(item.to_dict()) for item in result.items]

    def list_owned(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str = f"{LABEL_MANAGED_BY}={MANAGED_BY}",
    ) -> list[dict[str, Any]]:
        return self.list_objects(
            api_version, kind, namespace=namespace, label_selector=label_selector
        )

    def _raw_get(
        self, path: str, query: list[tuple[str, str]], *, timeout: float | tuple[float, float]
    ) -> Any:
        """A GET whose body is read by the caller (urllib3's response), with our auth."""
        return self.api_client.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )

    def service_proxy_get(
        self,
        namespace: str,
        service: str,
        port: str,
        path: str,
        query: list[tuple[str, str]],
        *,
        timeout: float = 5.0,
        backoff: Backoff | None = None,
    ) -> Any:
        """GET ``path`` of a Service's ready endpoint through the API server's proxy (the
        portal need not be on the pods' network, and the team's NetworkPolicy lets in only the
        ingress controller) and decode its JSON. The API server drops the Authorization header
        it was sent: a credential for the upstream travels in ``query``."""
        url = f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}"

        def read() -> Any:
            response = self._raw_get(url, query, timeout=timeout)
            try:
                return json.loads(response.data)
            finally:
                response.release_conn()

        return with_backoff(read, what=f"proxy GET {service}", backoff=backoff or self.backoff)

    def list_collection(
        self, api_version: str, kind: str, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object of a kind (all namespaces) as the API server's JSON, and the list's
        resourceVersion, from which a watch continues."""
        path = COLLECTION_PATHS[(api_version, kind)]
        query = [("labelSelector", label_selector)] if label_selector else []

        def read() -> tuple[list[dict[str, Any]], str]:
            response = self._raw_get(path, query, timeout=60)
            try:
                body = json.loads(response.data)
            finally:
                response.release_conn()
            return list(body.get("items") or []), str(body["metadata"]["resourceVersion"])

        return self._call(read, f"list {kind}")

    def watch_collection(
        self,
        api_version: str,
        kind: str,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[dict[str, Any]]:
        """Events of a kind from ``resource_version`` on (``{"type", "object"}``, bookmarks
        included), until the server ends the watch after ``timeout_seconds``.

        :class:`WatchExpired` when the version is too old (410, at connect time or as an
        ERROR event); :class:`ClusterUnreachable` when the connection cannot be made or
        breaks. Connecting is not retried here: the caller's loop reconnects with backoff.
        """
        path = COLLECTION_PATHS[(api_version, kind)]
        query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        what = f"watch {kind}"
        try:
            # Read timeout beyond the server's own end of the watch: a silent connection
            # (bookmarks come about every minute) is a broken one.
            response = self._raw_get(path, query, timeout=(10, timeout_seconds + 90))
        except ApiException as exc:
            if exc.status == 410:
                raise WatchExpired(f"{what}: {server_message(exc)}") from exc
            raise cluster_error(exc, what=what) from exc
        except NETWORK_ERRORS as exc:
            raise cluster_error(exc, what=what) from exc
        pending = b""
        try:
            for chunk in response.stream(amt=65536, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object") or {}
                        message = str(status.get("message") or status.get("reason") or "")
                        if status.get("code") == 410:
                            raise WatchExpired(f"{what}: {message}")
                        raise ClusterUnreachable(f"{what}: the server ended it: {message}")
                    yield event
        except NETWORK_ERRORS as exc:
            raise cluster_error(exc, what=what) from exc
        finally:
            response.release_conn()

    def pod_log(
        self, name: str, namespace: str, *, container: str, tail_lines: int, follow: bool
    ) -> Iterator[str]:
        """Lines of a container's log, with timestamps; with ``follow`` the stream stays open
        until the container stops. The request is made now (inside the caller's
        :func:`answer_within`, if any: the API server must answer by then), the lines are read
        as the iterator is. A stream that breaks ends with :class:`ClusterUnreachable`."""
        what = f"logs of {namespace}/{name}"
        response = self._call(
            lambda: self.core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                tail_lines=tail_lines,
                follow=follow,
                timestamps=True,
                _preload_content=False,
                # The answer is bounded (by the deadline, or 10 s); a followed log may then be
                # quiet for long, so its reads are not (below).
                **({"_request_timeout": (10, 10)} if follow else {}),
            ),
            what,
        )
        if follow:
            connection = getattr(response, "connection", None)
            sock = getattr(connection, "sock", None)
            if sock is not None:
                sock.settimeout(None)
        return self._log_lines(response, what)

    @staticmethod
    def _log_lines(response: Any, what: str) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = ""
        try:
            for chunk in response.stream(decode_content=True):
                pending += decoder.decode(chunk)
                *lines, pending = pending.split("\n")
                for line in lines:
                    yield line.removesuffix("\r")
            pending += decoder.decode(b"", final=True)
            if pending:
                yield pending.removesuffix("\r")
        except NETWORK_ERRORS as exc:
            raise cluster_error(exc, what=what) from exc
        finally:
            response.release_conn()

    def allowed(self, verb: str, resource: str, *, namespace: str, group: str = "") -> bool:
        """Whether our identity may ``verb`` ``resource`` in ``namespace`` (a
        SelfSubjectAccessReview, which every authenticated identity may create)."""
        review = self.resource("authorization.k8s.io/v1", "SelfSubjectAccessReview")
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "group": group,
                    "namespace": namespace,
                }
            },
        }
        result = self._call(lambda: review.create(body=body), f"access review {verb} {resource}")
        return bool(((result.to_dict() or {}).get("status") or {}).get("allowed"))

    def wait_until_allowed(
        self, verb: str, resource: str, *, namespace: str, timeout: float = 10.0
    ) -> None:
        """Wait for a just-created binding to take effect; :class:`ClusterRefused` if it does
        not within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.allowed(verb, resource, namespace=namespace):
            if time.monotonic() > deadline:
                raise ClusterRefused(
                    f"still not allowed to {verb} {resource} in {namespace} after {timeout:.0f} s",
                    status=403,
                    reason="Forbidden",
                )
            time.sleep(0.1)

    def apply_all(
        self, manifests: Iterable[Manifest], *, workload_id: int | None = None
    ) -> list[Applied]:
        return [self.apply(m, workload_id=workload_id) for m in manifests]
