"""Hand-made snapshots for the transport and page tests: spans, lanes, a whole snapshot, a board.

Constraints: pure data built from the snapshot contract (gpuflow.core.snapshot); no I/O.
"""

from __future__ import annotations

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.snapshot import (
    Attachment, Device, HostInfo, Lane, Problem, Process, Snapshot, Span, TracedProcess,
)


# -- snapshots -------------------------------------------------------------------------------------
def span(seq: int, start_us: int = 1_000_000) -> Span:
    return Span(seq=seq, kind="kernel", start_us=start_us + seq, dur_ns=1000, name="k",
                grid=(1, 1, 1), block=(32, 1, 1))


def lane(stream: int, seqs, label: str | None = None) -> Lane:
    spans = tuple(span(s) for s in seqs)
    return Lane(device=0, context=1, stream=stream, label=label or str(stream),
                executions=len(spans) + 10, spans_elided=10, spans=spans)


def make_snapshot(seq: int = 1, lanes: tuple[Lane, ...] = (), **kw) -> Snapshot:
    devices = kw.pop("devices", (
        Device(index=0, uuid="GPU-a", name="Test GPU", pci_bus_id="00000000:19:00.0",
               utilization_gpu_pct=87.0, utilization_memory_pct=41.0,
               memory_used_bytes=21 << 30, memory_total_bytes=80 << 30, temperature_c=47.0,
               power_draw_w=412.5, power_limit_w=700.0, clock_sm_mhz=1980, clock_mem_mhz=3201,
               pcie_tx_bytes_per_s=1000, pcie_rx_bytes_per_s=None, mig_mode="disabled"),
        Device(index=1, uuid="GPU-b", name="Test GPU", temperature_c=None, lost=True),
    ))
    processes = kw.pop("processes", (
        Process(pid=4242, name="train", user="alice", cmdline="python",
                attachments=(Attachment(0, "GPU-a", "compute", 3 << 30, 34.0, None),
                             Attachment(1, "GPU-b", "compute", None, None, None))),
    ))
    traced = kw.pop("traced", (
        TracedProcess(pid=4242, session="s1", name="train", cupti_status="ok", records=99,
                      lanes=lanes),
    ) if lanes else ())
    return Snapshot(seq=seq, timestamp=kw.pop("timestamp", 1764473412.5),
                    host=HostInfo(hostname="h", driver_version="580.1"),
                    problems=kw.pop("problems", (Problem("nvml", "something", "warning"),)),
                    devices=devices, processes=processes, traced=traced,
                    sources=("nvml",), **kw)


def board_with(*snapshots: Snapshot) -> SnapshotBoard:
    board = SnapshotBoard()
    for s in snapshots:
        board.publish(s)
    return board
