"""A workload's logs in the portal: the tail of a replica's log (live or archived), the download,
and the live stream as server-sent events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import (
    HttpRequest,
    HttpResponse,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from apps.common import streams
from apps.orchestration.cluster_reads import (
    LogsUnavailable,
    workload_logs,
)
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.selectors import (
    archived_log,
    archived_log_lines,
    log_choices,
    workload_log_download,
)
from apps.web.views.workloads.common import _workload

LOG_TAIL_LINES = 200


def _log_pick(request: HttpRequest) -> tuple[int, int | None]:
    """The replica and (archived) attempt asked for; anything unreadable is the default."""

    def number(name: str, minimum: int) -> int | None:
        raw = request.GET.get(name, "")
        return int(raw) if raw.isdigit() and minimum <= int(raw) <= 10_000 else None

    return number("replica", 0) or 0, number("attempt", 1)


@login_required
@require_GET
def workload_logs_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    replica, attempt = _log_pick(request)
    archived = None
    try:
        archived = archived_log(workload=workload, replica=replica, attempt=attempt)
        if archived is not None:
            lines = archived_log_lines(archived, tail_lines=LOG_TAIL_LINES)
        else:
            lines = list(
                workload_logs(workload=workload, tail_lines=LOG_TAIL_LINES, replica=replica)
            )
        problem = None
    except LogsUnavailable as exc:
        lines, problem = [], str(exc)
    except ClusterError as exc:
        # The API's words for the same error; the partial answers 200 so that htmx shows it.
        lines, problem = [], cluster_error_answer(exc).message
    download = reverse("workload-logs-download", args=[workload.pk]) + f"?replica={replica}"
    if archived is not None:
        download += f"&attempt={archived.attempt}"
    return render(
        request,
        "workloads/_logs.html",
        {
            "workload": workload,
            "lines": lines,
            "problem": problem,
            "tail": LOG_TAIL_LINES,
            "archived": archived,
            "replica": replica,
            "attempt": archived.attempt if archived is not None and attempt else None,
            "choices": log_choices(workload, replica),
            "download_url": download,
        },
    )


@login_required
@require_GET
def workload_logs_download(request: HttpRequest, workload_id: int) -> HttpResponse:
    """One replica's whole kept log as a file: the archive's, or the end of the live one."""
    workload = _workload(request, workload_id)
    replica, attempt = _log_pick(request)
    try:
        filename, lines = workload_log_download(workload=workload, replica=replica, attempt=attempt)
    except LogsUnavailable as exc:
        return HttpResponse(f"{exc}\n", status=409, content_type="text/plain; charset=utf-8")
    except ClusterError as exc:
        answer = cluster_error_answer(exc)
        return HttpResponse(
            f"{answer.message}\n", status=answer.status, content_type="text/plain; charset=utf-8"
        )
    response = HttpResponse(
        "".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def _sse(event: str, data: str) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


@login_required
@require_GET
def workload_logs_stream(request: HttpRequest, workload_id: int) -> StreamingHttpResponse:
    """Live follow as server-sent events: ``line`` events, then ``end`` or ``unavailable``.
    A workload whose objects are gone streams its archived log and ends."""
    workload = _workload(request, workload_id)
    replica, _ = _log_pick(request)

    def stream() -> Iterator[str]:
        try:
            archived = archived_log(workload=workload, replica=replica)
            if archived is not None:
                for line in archived_log_lines(archived, tail_lines=50):
                    yield _sse("line", line)
                yield _sse("end", "The workload has ended: this is its archived log.")
                return
            for line in workload_logs(
                workload=workload, tail_lines=50, follow=True, replica=replica
            ):
                yield _sse("line", line)
        except LogsUnavailable as exc:
            yield _sse("unavailable", str(exc))
            return
        except ClusterError as exc:
            yield _sse("unavailable", cluster_error_answer(exc).message)
            return
        yield _sse("end", "The log stream ended (the container stopped).")

    # Under ASGI the lines are read off the view's thread, with keep-alives, a time limit
    # and a per-user cap (apps/common/streams.py); under WSGI stream() is served as is.
    return streams.sse_response(
        request,
        lambda: workload_logs(workload=workload, tail_lines=50, follow=True),
        sse=_sse,
        render=_sse_item,
        sync_stream=stream,
    )


def _sse_item(kind: str, value: Any) -> str | None:
    """An item of the threaded reader as an event, as stream() sends them."""
    if kind == "line":
        return _sse("line", value)
    if isinstance(value, LogsUnavailable):
        return _sse("unavailable", str(value))
    if isinstance(value, ClusterError):
        return _sse("unavailable", cluster_error_answer(value).message)
    if kind == "end":
        return _sse("end", "The log stream ended (the container stopped).")
    raise value
