"""A team's datasets over the REST API: members list them, leads and admins register and
remove them; requests name them (``datasets: ["imagenet"]``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.models import User
from apps.accounts.selectors import team_for_user
from apps.api.base import error_responses
from apps.common.http import client_ip
from apps.datasets import core
from apps.datasets.models import Dataset
from apps.datasets.selectors import team_dataset, team_datasets
from apps.datasets.services import dataset_register, dataset_remove


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


class DatasetSerializer(serializers.ModelSerializer):
    mount_path = serializers.CharField(
        read_only=True, help_text="Where a claim dataset is mounted read-only."
    )
    secret = serializers.CharField(source="secret_name", read_only=True)
    registered_by = serializers.CharField(
        source="registered_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Dataset
        fields = ["name", "kind", "claim", "uri", "secret", "mount_path", "registered_by"]
        fields += ["created_at"]
        read_only_fields = fields


class DatasetRegisterSerializer(serializers.Serializer):
    name = serializers.CharField(
        allow_blank=True, help_text="Lower-case letters, digits and -; e.g. imagenet."
    )
    kind = serializers.ChoiceField(
        choices=core.KINDS,
        help_text="claim: a volume claim of the team namespace; object: an object-store prefix.",
    )
    claim = serializers.CharField(allow_blank=True, default="", help_text="kind claim.")
    uri = serializers.CharField(
        allow_blank=True, default="", help_text="kind object: e.g. s3://bucket/imagenet/."
    )
    secret = serializers.CharField(
        allow_blank=True,
        default="",
        help_text="kind object: a team secret whose keys the pods get as "
        "GPUPAAS_DATASET_<NAME>_<KEY>.",
    )


DATASET_EXAMPLE = {
    "name": "imagenet",
    "kind": "claim",
    "claim": "imagenet-pvc",
    "uri": "",
    "secret": "",
    "mount_path": "/datasets/imagenet",
    "registered_by": "lena",
    "created_at": "2026-01-05T09:00:00Z",
}


class TeamDatasetListView(APIView):
    @extend_schema(
        operation_id="teams_datasets_list",
        summary="Datasets of a team",
        description="What the team's requests may name in ``datasets``.",
        responses={200: DatasetSerializer(many=True), **error_responses(404)},
        examples=[OpenApiExample("one", value=[DATASET_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request, slug: str) -> Response:
        team = team_for_user(_actor(request), slug)
        rows = team_datasets(team).select_related("registered_by")
        return Response(DatasetSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="teams_datasets_register",
        summary="Register a dataset",
        description="Leads and admins. A claim dataset names a volume claim that exists in the "
        "team namespace; it is mounted read-only at /datasets/<name>. An object-store dataset "
        "is named to the pods in GPUPAAS_DATASET_<NAME>_URI (it is not mounted).",
        request=DatasetRegisterSerializer,
        responses={201: DatasetSerializer, **error_responses(400, 403, 404)},
        examples=[
            OpenApiExample(
                "claim",
                value={"name": "imagenet", "kind": "claim", "claim": "imagenet-pvc"},
                request_only=True,
            ),
            OpenApiExample(
                "registered", value=DATASET_EXAMPLE, response_only=True, status_codes=["201"]
            ),
        ],
    )
    def post(self, request: Request, slug: str) -> Response:
        actor = _actor(request)
        team = team_for_user(actor, slug)
        body = DatasetRegisterSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        dataset = dataset_register(
            actor=actor, team=team, source_ip=client_ip(request), **body.validated_data
        )
        return Response(DatasetSerializer(dataset).data, status=status.HTTP_201_CREATED)


class TeamDatasetDetailView(APIView):
    @extend_schema(
        operation_id="teams_datasets_remove",
        summary="Remove a dataset",
        description="Leads and admins. New requests can no longer name it; the data is left alone.",
        responses={204: None, **error_responses(403, 404)},
    )
    def delete(self, request: Request, slug: str, name: str) -> Response:
        team = team_for_user(_actor(request), slug)
        dataset = team_dataset(team, name)
        dataset_remove(actor=_actor(request), dataset=dataset, source_ip=client_ip(request))
        return Response(status=status.HTTP_204_NO_CONTENT)
