"""An in-memory NVML for tests of the agent's mapping (no driver, no GPU)."""

from __future__ import annotations

from dataclasses import dataclass, field

from apps.telemetry.agent.nvml import MemoryInfo, Process


@dataclass
class FakeGpu:
    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    pci_bus_id: str = "00000000:18:00.0"
    total_mib: int = 81559
    used_mib: int = 0
    utilisation: int = 0
    power: float | None = 70.0
    temperature: int | None = 35
    ecc: tuple[int, int] = (0, 0)
    processes: list[Process] = field(default_factory=list)
    sm_percent: dict[int, int] = field(default_factory=dict)


@dataclass
class FakeNvml:
    gpus: list[FakeGpu]
    driver: str = "570.133.20"
    pending_xids: list[tuple[int, int]] = field(default_factory=list)

    def driver_version(self) -> str:
        return self.driver

    def device_count(self) -> int:
        return len(self.gpus)

    def name(self, index: int) -> str:
        return self.gpus[index].name

    def uuid(self, index: int) -> str:
        return self.gpus[index].uuid

    def pci_bus_id(self, index: int) -> str:
        return self.gpus[index].pci_bus_id

    def memory(self, index: int) -> MemoryInfo:
        gpu = self.gpus[index]
        return MemoryInfo(gpu.total_mib, gpu.used_mib, gpu.total_mib - gpu.used_mib)

    def utilisation_percent(self, index: int) -> int:
        return self.gpus[index].utilisation

    def power_watts(self, index: int) -> float | None:
        return self.gpus[index].power

    def temperature_c(self, index: int) -> int | None:
        return self.gpus[index].temperature

    def ecc_errors(self, index: int) -> tuple[int, int]:
        return self.gpus[index].ecc

    def processes(self, index: int) -> list[Process]:
        return list(self.gpus[index].processes)

    def process_sm_percent(self, index: int) -> dict[int, int]:
        return dict(self.gpus[index].sm_percent)

    def xid_events(self) -> list[tuple[int, int]]:
        events, self.pending_xids = self.pending_xids, []
        return events
