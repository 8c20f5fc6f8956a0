"""The catalogue over the REST API: GPU classes with their free capacity, and images."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.base import error_responses
from apps.catalog.core import IMAGE_AVAILABLE, IMAGE_MISSING, IMAGE_UNKNOWN
from apps.catalog.models import GpuClass, Image
from apps.catalog.selectors import gpu_classes_offered, image_availability, images_offered
from apps.workloads.selectors import GpuClassCapacity, gpu_class_capacity


class GpuClassSerializer(serializers.Serializer):
    name = serializers.CharField(source="gpu_class.name")
    memory_mib = serializers.IntegerField(source="gpu_class.memory_mib")
    sharing_mode = serializers.CharField(source="gpu_class.sharing_mode")
    hourly_cost = serializers.DecimalField(
        source="gpu_class.hourly_cost", max_digits=10, decimal_places=4, coerce_to_string=True
    )
    currency = serializers.SerializerMethodField(
        help_text="Of hourly_cost (the platform's currency)."
    )
    description = serializers.CharField(source="gpu_class.description")
    capacity_milli = serializers.IntegerField(help_text="All GPUs of the class, ×1000.")
    used_milli = serializers.IntegerField(help_text="Held by admitted and running workloads.")
    free_milli = serializers.IntegerField(help_text="capacity − used (never below 0).")
    nodes = serializers.IntegerField(help_text="Ready nodes in the inventory (0: not synced).")

    def get_currency(self, row: GpuClassCapacity) -> str:
        return str(settings.PLATFORM_CURRENCY)


GPU_CLASS_EXAMPLE = {
    "name": "H100-80GB",
    "memory_mib": 81559,
    "sharing_mode": "whole",
    "hourly_cost": "4.5000",
    "currency": "EUR",
    "description": "",
    "capacity_milli": 32000,
    "used_milli": 20500,
    "free_milli": 11500,
    "nodes": 4,
}


class GpuClassListView(APIView):
    @extend_schema(
        operation_id="gpu_classes_list",
        summary="GPU classes with free capacity",
        description=(
            "Every class on offer, its capacity from the cluster inventory and what is free "
            "now, in milli-GPU. Free capacity is a hint: quotas and placement decide."
        ),
        responses={200: GpuClassSerializer(many=True), **error_responses()},
        examples=[OpenApiExample("classes", value=[GPU_CLASS_EXAMPLE], response_only=True)],
    )
    def get(self, request: Request) -> Response:
        return Response(GpuClassSerializer(gpu_class_capacity(), many=True).data)


class GpuClassDetailView(APIView):
    @extend_schema(
        operation_id="gpu_classes_retrieve",
        summary="One GPU class with free capacity",
        responses={200: GpuClassSerializer, **error_responses(404)},
        examples=[OpenApiExample("class", value=GPU_CLASS_EXAMPLE, response_only=True)],
    )
    def get(self, request: Request, name: str) -> Response:
        rows: list[GpuClassCapacity] = gpu_class_capacity(gpu_classes_offered().filter(name=name))
        if not rows:
            raise GpuClass.DoesNotExist
        return Response(GpuClassSerializer(rows[0]).data)


class ImageOnClusterSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    status = serializers.ChoiceField(
        choices=[IMAGE_AVAILABLE, IMAGE_MISSING, IMAGE_UNKNOWN],
        help_text="available: on at least one of its nodes; missing: every node reports its "
        "images and none holds it (a request for it is refused); unknown: none holds it but some "
        "node reports no images at all, e.g. a simulated one (never a refusal).",
    )
    nodes = serializers.IntegerField(help_text="Nodes that hold it.")
    reporting = serializers.IntegerField(help_text="Nodes that report the images they hold.")


class ImageSerializer(serializers.ModelSerializer):
    availability = serializers.SerializerMethodField(
        help_text="Per enabled cluster, whether its GPU nodes (of gpu_class, when asked) hold "
        "the image, from the images they report (refreshed with the node inventory)."
    )

    class Meta:
        model = Image
        fields = ["name", "reference", "kind", "description", "read_only_root", "availability"]
        read_only_fields = fields

    @extend_schema_field(ImageOnClusterSerializer(many=True))
    def get_availability(self, image: Image) -> list[dict[str, Any]]:
        clusters = self.context.get("availability", {}).get(image.name, ())
        return [ImageOnClusterSerializer(c).data for c in clusters]


class ImageListView(APIView):
    @extend_schema(
        operation_id="images_list",
        summary="Images on offer, and on which clusters",
        responses={200: ImageSerializer(many=True), **error_responses(404)},
        examples=[
            OpenApiExample(
                "images",
                value=[
                    {
                        "name": "PyTorch training",
                        "reference": "nvcr.io/nvidia/pytorch:24.12-py3",
                        "kind": "training",
                        "description": "",
                        "read_only_root": False,
                        "availability": [
                            {
                                "cluster": "onprem",
                                "status": "available",
                                "nodes": 3,
                                "reporting": 4,
                            },
                            {"cluster": "burst", "status": "unknown", "nodes": 0, "reporting": 0},
                        ],
                    }
                ],
                response_only=True,
            )
        ],
        parameters=[
            OpenApiParameter(
                "gpu_class",
                str,
                description="Availability on the nodes of this GPU class that take work (the "
                "nodes a request for it may run on), instead of all GPU nodes.",
            )
        ],
    )
    def get(self, request: Request) -> Response:
        gpu_class = None
        if request.query_params.get("gpu_class"):
            gpu_class = gpu_classes_offered().get(name=request.query_params["gpu_class"])
        images = list(images_offered())
        availability = image_availability(images, gpu_class=gpu_class)
        return Response(
            ImageSerializer(images, many=True, context={"availability": availability}).data
        )
