"""The narrow NVML boundary: the handful of calls the agent makes, as a Protocol.

``PynvmlBackend`` wraps nvidia-ml-py (pynvml); tests use ``apps.telemetry.agent.fake``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class NvmlUnavailable(RuntimeError):
    """No NVIDIA driver or no GPU on this machine."""


@dataclass(frozen=True)
class MemoryInfo:
    total_mib: int
    used_mib: int
    free_mib: int


@dataclass(frozen=True)
class Process:
    pid: int
    used_mib: int


class Nvml(Protocol):
    def driver_version(self) -> str: ...

    def device_count(self) -> int: ...

    def name(self, index: int) -> str: ...

    def uuid(self, index: int) -> str: ...

    def pci_bus_id(self, index: int) -> str: ...

    def memory(self, index: int) -> MemoryInfo: ...

    def utilisation_percent(self, index: int) -> int: ...

    def power_watts(self, index: int) -> float | None: ...

    def temperature_c(self, index: int) -> int | None: ...

    def ecc_errors(self, index: int) -> tuple[int, int]:
        """(corrected, uncorrected) volatile totals; (0, 0) where ECC is off or unsupported."""
        ...

    def processes(self, index: int) -> list[Process]: ...

    def process_sm_percent(self, index: int) -> dict[int, int]:
        """pid → SM utilisation (percent of the whole GPU) over the last sampling period."""
        ...

    def xid_events(self) -> list[tuple[int, int]]:
        """(device index, XID) of critical XID events since the last call; never blocks."""
        ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlBackend:
    """NVML through nvidia-ml-py. Raises NvmlUnavailable when the driver is missing."""

    def __init__(self) -> None:
        import pynvml

        self._nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailable(f"NVML could not start: {exc}") from exc
        self._handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]
        self._last_sample: dict[int, int] = {}
        self._events: Any = None
        try:
            self._events = pynvml.nvmlEventSetCreate()
            for handle in self._handles:
                pynvml.nvmlDeviceRegisterEvents(
                    handle, pynvml.nvmlEventTypeXidCriticalError, self._events
                )
        except pynvml.NVMLError:
            self._events = None  # XID events not supported (e.g. some virtualised GPUs)
        self._index = {self._key(h): i for i, h in enumerate(self._handles)}

    def _key(self, handle: Any) -> str:
        return _text(self._nv.nvmlDeviceGetUUID(handle))

    def shutdown(self) -> None:
        if self._events is not None:
            self._nv.nvmlEventSetFree(self._events)
        self._nv.nvmlShutdown()

    def driver_version(self) -> str:
        return _text(self._nv.nvmlSystemGetDriverVersion())

    def device_count(self) -> int:
        return len(self._handles)

    def name(self, index: int) -> str:
        return _text(self._nv.nvmlDeviceGetName(self._handles[index]))

    def uuid(self, index: int) -> str:
        return _text(self._nv.nvmlDeviceGetUUID(self._handles[index]))

    def pci_bus_id(self, index: int) -> str:
        return _text(self._nv.nvmlDeviceGetPciInfo(self._handles[index]).busId)

    def memory(self, index: int) -> MemoryInfo:
        info = self._nv.nvmlDeviceGetMemoryInfo(self._handles[index])
        mib = 1024 * 1024
        return MemoryInfo(info.total // mib, info.used // mib, info.free // mib)

    def utilisation_percent(self, index: int) -> int:
        return int(self._nv.nvmlDeviceGetUtilizationRates(self._handles[index]).gpu)

    def power_watts(self, index: int) -> float | None:
        try:
            return float(self._nv.nvmlDeviceGetPowerUsage(self._handles[index])) / 1000
        except self._nv.NVMLError:
            return None

    def temperature_c(self, index: int) -> int | None:
        try:
            return int(
                self._nv.nvmlDeviceGetTemperature(
                    self._handles[index], self._nv.NVML_TEMPERATURE_GPU
                )
            )
        except self._nv.NVMLError:
            return None

    def ecc_errors(self, index: int) -> tuple[int, int]:
        nv = self._nv
        counts = []
        for kind in (nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED):
            try:
                counts.append(
                    int(
                        nv.nvmlDeviceGetTotalEccErrors(
                            self._handles[index], kind, nv.NVML_VOLATILE_ECC
                        )
                    )
                )
            except nv.NVMLError:
                counts.append(0)
        return counts[0], counts[1]

    def processes(self, index: int) -> list[Process]:
        try:
            running = self._nv.nvmlDeviceGetComputeRunningProcesses(self._handles[index])
        except self._nv.NVMLError:
            return []
        return [Process(int(p.pid), int((p.usedGpuMemory or 0) // (1024 * 1024))) for p in running]

    def process_sm_percent(self, index: int) -> dict[int, int]:
        since = self._last_sample.get(index, 0)
        try:
            samples = self._nv.nvmlDeviceGetProcessUtilization(self._handles[index], since)
        except self._nv.NVMLError:
            return {}
        result: dict[int, int] = {}
        for sample in samples:
            result[int(sample.pid)] = max(result.get(int(sample.pid), 0), int(sample.smUtil))
            self._last_sample[index] = max(self._last_sample.get(index, 0), int(sample.timeStamp))
        return result

    def xid_events(self) -> list[tuple[int, int]]:
        if self._events is None:
            return []
        events: list[tuple[int, int]] = []
        while True:
            try:
                data = self._nv.nvmlEventSetWait(self._events, 0)
            except self._nv.NVMLError:
                return events  # timeout: nothing pending
            index = self._index.get(self._key(data.device), -1)
            events.append((index, int(data.eventData)))
