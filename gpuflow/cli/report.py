"""What the CLI prints about the agent's state: the start banner and problems, in plain words.

Constraints: reads only the published Snapshot (the one contract), never a collector directly;
every text from it goes through :func:`gpuflow.cli.printable.printable` (drivers and plugins
write it, and plugins may quote what a program wrote).
"""

from __future__ import annotations

from typing import TextIO

from gpuflow import __version__
from gpuflow.cli.printable import printable
from gpuflow.core.snapshot import Snapshot


#: After an error, the same sentence the page draws (gpuflow/ui/geometry.js, DOCTOR_HINT).
DOCTOR_HINT = "Run gpuflow doctor on this machine: it checks each part and says what to do."


def _gib(value: int | None) -> str:
    return "—" if value is None else f"{value / 2**30:.1f} GiB"


def nvml_answered(snapshot: Snapshot) -> bool:
    """Whether NVML's part is in ``snapshot`` with neither an error nor a warning of NVML's: what it
    says of the GPUs is then its answer (a first poll still running past the interval is a warning
    and no devices yet: a slow start, not "no GPUs")."""
    return "nvml" in snapshot.sources and not any(p.source == "nvml" and p.severity in ("error", "warning")
                                                  for p in snapshot.problems)


def describe_start(snapshot: Snapshot | None, url: str, out: TextIO) -> list[str]:
    """The start banner; returns the Problem texts it showed (the log need not repeat them)."""
    out.write(f"GPUFlow {__version__}: live view at {url}\n")
    if snapshot is None:
        out.write("  (no snapshot yet: the collectors are still starting)\n")
        return []
    host = snapshot.host
    if snapshot.devices:
        driver = f"driver {printable(host.driver_version)}" if host.driver_version else "driver version unknown"
        cuda = f", CUDA {printable(host.cuda_driver_version)}" if host.cuda_driver_version else ""
        out.write(f"  {len(snapshot.devices)} GPU(s), {driver}{cuda}:\n")
        for d in snapshot.devices:
            state = "LOST" if d.lost else f"{_gib(d.memory_used_bytes)} / {_gib(d.memory_total_bytes)} used"
            out.write(f"    [{d.index}] {printable(d.name or d.uuid)}  {state}\n")
        out.write(f"  {len(snapshot.processes)} process(es) using them right now\n")
    elif nvml_answered(snapshot):
        out.write("  NVML works but sees no GPUs\n")
    for p in snapshot.problems:
        out.write(f"  {printable(p.severity)}: [{printable(p.source)}] {printable(p.message)}\n")
    if any(p.severity == "error" for p in snapshot.problems):
        out.write(f"  {DOCTOR_HINT}\n")
    return [p.message for p in snapshot.problems]
