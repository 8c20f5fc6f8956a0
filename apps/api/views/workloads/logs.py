"""A workload's logs (tail, download, live stream) and events over the API; the logs of a workload
that ended come from its archive."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.base import Conflict, error_responses
from apps.api.renderers import FastJSONRenderer
from apps.api.serializers import (
    ClusterEventSerializer,
    WorkloadEventSerializer,
    WorkloadEventsSerializer,
)
from apps.api.views.workloads.common import _visible
from apps.common import streams
from apps.orchestration.cluster_reads import LogsUnavailable, workload_logs
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.selectors import (
    archived_log,
    archived_log_lines,
    workload_cluster_events,
    workload_log_download,
)


class PlainTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        if isinstance(data, dict) and "message" in data:
            return f"{data.get('code', 'error')}: {data['message']}\n".encode()
        return str(data).encode()


class LogsQuerySerializer(serializers.Serializer):
    tail = serializers.IntegerField(min_value=1, max_value=10_000, default=200)
    follow = serializers.BooleanField(default=False)
    replica = serializers.IntegerField(min_value=0, max_value=10_000, default=0)
    attempt = serializers.IntegerField(
        min_value=1,
        max_value=10_000,
        required=False,
        help_text="An archived attempt of the replica (1 = its first pod); default: the latest.",
    )
    download = serializers.BooleanField(
        default=False,
        help_text="The whole kept log as a file (ignores tail and follow).",
    )


class WorkloadLogsView(APIView):
    renderer_classes = [FastJSONRenderer, PlainTextRenderer]

    @extend_schema(
        operation_id="workloads_logs",
        summary="Container logs",
        description=(
            "The last `tail` lines of one replica's main container, as plain text with "
            "timestamps. With `follow=true` the response streams new lines until the "
            "container stops or the client disconnects. Once a workload has ended and its "
            "objects are gone, the lines come from the archive (the end of each replica's log "
            "per attempt, kept for a set number of days); `attempt` picks an earlier attempt. "
            "`download=true` answers the whole kept log as an attachment. 409 when there are "
            "no logs to show (not placed yet, no pod, nothing kept) or the cluster refuses them "
            "(container not started); 503 when the cluster is unreachable."
        ),
        parameters=[LogsQuerySerializer],
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                examples=[
                    OpenApiExample(
                        "lines",
                        value="2025-01-01T12:00:05Z epoch 1/90 loss=2.31\n",
                        response_only=True,
                    )
                ],
            ),
            **error_responses(400, 404, 409, 422, 503),
        },
    )
    def get(self, request: Request, workload_id: int) -> StreamingHttpResponse:
        workload = _visible(request, workload_id)
        query = LogsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        opts = query.validated_data
        which = {"workload": workload, "replica": opts["replica"], "attempt": opts.get("attempt")}
        try:
            if opts["download"]:
                filename, whole = workload_log_download(**which)
                response = StreamingHttpResponse(
                    (f"{line}\n" for line in whole), content_type="text/plain; charset=utf-8"
                )
                response["Content-Disposition"] = f'attachment; filename="{filename}"'
                response["Cache-Control"] = "no-store"
                return response
            row = archived_log(**which)
            if row is not None:
                lines: Iterator[str] = iter(archived_log_lines(row, tail_lines=opts["tail"]))
            else:
                lines = workload_logs(
                    workload=workload,
                    tail_lines=opts["tail"],
                    follow=opts["follow"],
                    replica=opts["replica"],
                )
                if streams.is_asgi(request):
                    return self._served_async(request, lines)
            # The generator talks to the cluster on its first step: take it here, so that "no
            # logs" is a 409 and a cluster error its answer (base.exception_handler), with the
            # error shape, rather than a broken 200 stream.
            first = list(_take_one(lines))
        except LogsUnavailable as exc:
            raise Conflict(str(exc), code="logs_unavailable") from exc
        response = StreamingHttpResponse(
            (f"{line}\n" for line in chain(first, _until_unavailable(lines))),
            content_type="text/plain; charset=utf-8",
        )
        response["Cache-Control"] = "no-store"
        response["X-Accel-Buffering"] = "no"  # let proxies pass followed lines at once
        return response

    def _served_async(self, request: Request, lines: Iterator[str]) -> StreamingHttpResponse:
        """Under ASGI the lines are read off the view's thread and the first one (or the
        error that makes the answer a 409 or 503) is awaited on the event loop
        (apps/common/streams.py); each user holds at most STREAMS_PER_USER streams."""
        slot = streams.Slot.claim(request.user.pk)
        if slot is None:
            raise TooManyStreams(streams.too_many_message())

        def on_error(exc: Exception) -> Response:
            if isinstance(exc, LogsUnavailable):
                exc = Conflict(str(exc), code="logs_unavailable")
            return self.finalize_response(request, self.handle_exception(exc))

        return streams.PendingStream(lines, render=_stream_chunk, on_error=on_error, slot=slot)

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        return streams.opens_streams(super().as_view(**initkwargs))


class TooManyStreams(exceptions.APIException):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    default_code = "too_many_streams"


def _stream_chunk(kind: str, value: Any) -> str | None:
    """An item of the threaded reader as plain text: the same lines as the synchronous
    path, with a cluster failure mid-stream as its last line."""
    if kind == "line":
        return f"{value}\n"
    if kind == "error":
        if isinstance(value, LogsUnavailable):
            return f"[gpupaas] log stream ended: {value}\n"
        if isinstance(value, ClusterError):
            return f"[gpupaas] log stream ended: {cluster_error_answer(value).message}\n"
        raise value
    return None


def _take_one(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        yield line
        return


def _until_unavailable(lines: Iterator[str]) -> Iterator[str]:
    """The rest of the stream; a cluster failure mid-stream ends it with a last line."""
    try:
        yield from lines
    except LogsUnavailable as exc:
        yield f"[gpupaas] log stream ended: {exc}"
    except ClusterError as exc:
        yield f"[gpupaas] log stream ended: {cluster_error_answer(exc).message}"


class WorkloadEventsView(APIView):
    @extend_schema(
        operation_id="workloads_events",
        summary="State changes and Kubernetes events",
        description=(
            "The workload's state changes with their reasons, and its Kubernetes events: the "
            "cluster's while its objects exist, the archived ones after it has ended."
        ),
        responses={200: WorkloadEventsSerializer, **error_responses(404)},
        examples=[
            OpenApiExample(
                "events",
                value={
                    "events": [
                        {
                            "created_at": "2025-01-01T12:00:00Z",
                            "from_state": "",
                            "to_state": "pending",
                            "reason": "Submitted.",
                            "actor": "alice",
                        }
                    ],
                    "cluster_events": [
                        {
                            "time": "2025-01-01T12:01:00Z",
                            "type": "Normal",
                            "reason": "Scheduled",
                            "message": "Successfully assigned team-vision/wl-42-0 to gpu-node-1",
                            "object": "Pod/wl-42-0",
                            "count": 1,
                        }
                    ],
                    "cluster_events_unavailable": None,
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request, workload_id: int) -> Response:
        workload = _visible(request, workload_id)
        events = workload.events.select_related("actor").order_by("created_at", "id")
        cluster_events: list[Any] = []
        unavailable: str | None = None
        try:
            # The cluster's while the objects exist, the archived ones after.
            cluster_events = workload_cluster_events(workload=workload).events
        except LogsUnavailable as exc:
            unavailable = str(exc)
        except ClusterError as exc:
            unavailable = cluster_error_answer(exc).message
        return Response(
            {
                "events": WorkloadEventSerializer(events, many=True).data,
                "cluster_events": ClusterEventSerializer(cluster_events, many=True).data,
                "cluster_events_unavailable": unavailable,
            }
        )
