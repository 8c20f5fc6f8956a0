"""Middleware of the portal, the API and the admin alike: bounds on what a request waits for."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from apps.common.taskqueue import writes_ask_broker
from apps.orchestration.kube import answer_within


class ClusterDeadlineMiddleware:
    """Each request's cluster calls answer within ORCHESTRATION_REQUEST_DEADLINE_MS in all, or
    come out as "the cluster cannot be reached" (``apps.orchestration.kube.answer_within``).
    A streamed answer (followed logs) runs after this returns, with the stream's own timeouts."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        with answer_within(settings.ORCHESTRATION_REQUEST_DEADLINE_MS / 1000):
            return self.get_response(request)


class BrokerCheckMiddleware:
    """A request's writes that queue work are refused when the broker (Redis) cannot be reached,
    rather than done and left for the periodic passes (``apps.common.taskqueue``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        with writes_ask_broker():
            return self.get_response(request)
