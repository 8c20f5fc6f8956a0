"""The gpupaas node agent: DCGM-named GPU metrics and a node health report from NVML, for GPU
nodes without dcgm-exporter. ``python -m apps.telemetry.agent --port 9400``."""
