"""The admission bench counts CPU only for the run's own processes: a process it started (and
what runs under it) counts, under the part it was started as; a process elsewhere on the
machine does not, however busy."""

from __future__ import annotations

import subprocess
import sys
import time

from bench.admission.jobs import CpuMeter

BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def _burn(seconds: float) -> list[str]:
    return [sys.executable, "-c", BURN.format(seconds=seconds)]


def test_the_runs_processes_count_and_a_strangers_do_not() -> None:
    meter = CpuMeter(database="no_such_database", every=0.1)
    meter.start()
    # A process the run started as one of its parts, and one under it.
    manager = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run({_burn(0.3)!r})"]
    )
    meter.add_root(manager.pid, "Kueue manager")
    # A process the benchmark started itself (a gpupaas part).
    part = subprocess.Popen(_burn(0.3))
    # A stranger: started through a parent that exits at once, so it is nobody's child here.
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import subprocess; subprocess.Popen({_burn(1.5)!r}, start_new_session=True)",
        ],
        check=True,
    )
    manager.wait(timeout=30)
    part.wait(timeout=30)
    time.sleep(1.0)  # the stranger burns on meanwhile
    spent = meter.stop()
    assert 0.2 <= spent.get("Kueue manager", 0.0) <= 1.0, spent
    assert 0.2 <= spent.get("gpupaas processes", 0.0) <= 1.0, spent
    # The stranger's 1.5 s are in no part (each part's bound is below it); the machine's
    # total has everything.
    assert set(spent) <= {"Kueue manager", "gpupaas processes", "benchmark client", "machine"}
    assert spent["machine"] >= sum(v for k, v in spent.items() if k != "machine")
