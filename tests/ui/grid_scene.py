"""A collector plugin for the SM grid's and the edges' browser tests (tests/ui/test_sm_grid.py): one
snapshot part made at start and never changed, holding every case the grid and the edges draw.

* GPU 0: GPM means, PCIe measured both ways against a gen 5 x16 peak, NVLinks to GPU 1, and a
  traced process on it (its DEVICE record's SM count, a busy share, copies pinned and pageable both
  ways) whose top kernel there has a theoretical occupancy, a limiter and waves.
* GPU 1: the same traced process, but no GPM (its means are "—"), no PCIe rates (dashed
  hairlines), and its kernel's occupancy not known (a cluster launch).
* GPU 2: GPM and PCIe rates (received less, transmitted more than GPU 0), no traced process:
  no cells, and the caption says why.
* GPU 3: lost.
* GPU 4: held by a traced process whose records say nothing of its devices (an agent from before
  the DEVICE facts): no cells, and the caption says no traced process described it.

Loaded with ``--plugin tests.ui.grid_scene`` from the repository's root (the agent's working
directory), beside the fake collector's agent settings in tests/ui/conftest.py. Its figures are
the module's constants, which the tests compare the page with.
"""

from __future__ import annotations

import time

from gpuflow import hookimpl
from gpuflow.core.snapshot import (
    Attachment, CopyRate, Device, GpmReadings, HostInfo, KernelLaunch, KernelStat, Lane, LinkReadings, NvLink, Process,
    SnapshotPart, Span, TracedDevice, TracedProcess,
)

SLOT = __name__
UUIDS = tuple(f"GPU-00000000-0000-4000-8000-00000000aaa{i}" for i in range(5))
PID, OTHER_PID, UNDESCRIBED_PID = 4242, 5151, 6161
SMS = 132
PEAK = 32e9 * 128 / 130 * 16 / 8   #: PCIe gen 5 x16, each way
#: (received, transmitted) bytes/s of GPUs 0 and 2; GPU 1's are not measured
PCIE = {0: (40e9, 5e9), 2: (10e9, 20e9)}
GPM = {0: (71.5, 40.2), 2: (12.0, 6.5), 4: (30.0, 20.0)}   #: (SM busy %, SM occupancy %)
#: GPU 0's four NVLinks to GPU 1: bytes/s out of GPU 0 and into it, each link
NVLINK_TX, NVLINK_RX = 30e9, 7.5e9
KERNELS = (
    KernelStat("void gemm_tile<128>(float const*, float*)", "_Z9gemm_tileILi128EEvPKfPf", 900, 9_000_000_000, 9_000_000, 11_000_000, 900),
    KernelStat("clustered_attn(float*)", "_Z14clustered_attnPf", 300, 3_000_000_000, 9_000_000, 11_000_000, 300),
    KernelStat("tiny(int)", "_Z4tinyi", 50, 1_000_000, 10_000, 30_000, 50),
)
#: GPU 0's top kernel (the traced process's device 0): its launch entry
TOP = KernelLaunch("_Z9gemm_tileILi128EEvPKfPf", 2, configs_more=0, device=0, block_threads=256, registers=128,
                   shared_bytes=48 * 1024, occupancy_pct=50.0, blocks_per_sm=4, limiters="registers",
                   waves_min=1.2, waves_max=3.4, occupancy_min_pct=37.5, occupancy_max_pct=50.0)
LAUNCHES = (
    TOP,
    KernelLaunch("_Z14clustered_attnPf", 1, device=1, block_threads=128, registers=64, shared_bytes=0,
                 unavailable="cluster launch"),
    KernelLaunch("_Z4tinyi", 1, device=0, block_threads=32, registers=16, shared_bytes=0, occupancy_pct=50.0,
                 blocks_per_sm=32, limiters="blocks", waves_min=0.1, waves_max=0.1, occupancy_min_pct=50.0,
                 occupancy_max_pct=50.0),
)
COPIES = (CopyRate("h2d", "pinned", 40, 40 * 64 << 20, 50_000_000, 53.2e9),
          CopyRate("h2d", "pageable", 10, 10 * 64 << 20, 56_000_000, 11.9e9),
          CopyRate("d2h", "pinned", 20, 20 * 64 << 20, 66_000_000, 20.1e9))
BUSY = 87.5


def _device(i: int) -> Device:
    if i == 3:
        return Device(index=3, uuid=UUIDS[3], name="NVIDIA H200", lost=True)
    rx, tx = PCIE.get(i, (None, None))
    gpm = GpmReadings(None, 1.0, sm_util_pct=GPM[i][0], sm_occupancy_pct=GPM[i][1]) if i in GPM else None
    nvlinks = ()
    if i in (0, 1):
        peer = 1 - i
        nvlinks = tuple(NvLink(link, "up", f"00000000:{0x19 + peer:02X}:00.0", peer,
                               NVLINK_TX if i == 0 else NVLINK_RX, NVLINK_RX if i == 0 else NVLINK_TX) for link in range(4))
    links = LinkReadings(pcie_gen=5, pcie_width=16, pcie_gen_max=5, pcie_width_max=16, pcie_peak_bytes_per_s=PEAK,
                         pcie_rate_source="gpm", nvlinks=nvlinks)
    return Device(index=i, uuid=UUIDS[i], name="NVIDIA H200", pci_bus_id=f"00000000:{0x19 + i:02X}:00.0",
                  utilization_gpu_pct=80.0, utilization_memory_pct=30.0, memory_used_bytes=40 << 30,
                  memory_total_bytes=141 << 30, temperature_c=60.0, power_draw_w=500.0, power_limit_w=700.0,
                  clock_sm_mhz=1980, clock_mem_mhz=3201, pcie_tx_bytes_per_s=None if tx is None else int(tx),
                  pcie_rx_bytes_per_s=None if rx is None else int(rx), mig_mode="disabled", gpm=gpm, links=links)


def _traced(now_us: int) -> TracedProcess:
    lanes = []
    for device in (0, 1):
        spans = tuple(Span(seq=device * 100 + k + 1, kind="kernel", start_us=now_us - 600_000 + k * 50_000 + device * 7,
                           dur_ns=30_000_000, name=KERNELS[device].name, grid=(512, 1, 1), block=(256, 1, 1))
                      for k in range(10))
        lanes.append(Lane(device=device, context=1, stream=13 + device, label=f"compute{device}", executions=10,
                          spans_elided=0, spans=spans))
    devices = (TracedDevice(0, uuid=UUIDS[0], name="NVIDIA H200", compute_capability=(9, 0), sm_count=SMS,
                            busy_pct=BUSY, busy_window_ms=1000.0, busy_window_end_us=now_us - 300_000, copies=COPIES),
               TracedDevice(1, uuid=UUIDS[1], name="NVIDIA H200", compute_capability=(9, 0), sm_count=SMS))
    return TracedProcess(pid=PID, session="gridscene000001", name="trainer", cupti_status="ok", records=20,
                         kernels=KERNELS, lanes=tuple(lanes), window_start_us=now_us - 600_000,
                         window_end_us=now_us - 120_000, behind_live_ms=120.0, devices=devices, kernel_launches=LAUNCHES)


def scene(now_s: float) -> SnapshotPart:
    now_us = int(now_s * 1e6)
    procs = (Process(PID, "trainer", "alice", "python train.py", attachments=(
                 Attachment(0, UUIDS[0], memory_used_bytes=30 << 30, sm_util_pct=90.0),
                 Attachment(1, UUIDS[1], memory_used_bytes=30 << 30, sm_util_pct=85.0))),
             Process(OTHER_PID, "server", "bob", "serve", attachments=(
                 Attachment(2, UUIDS[2], memory_used_bytes=8 << 30, sm_util_pct=12.0),)),
             Process(UNDESCRIBED_PID, "older", "carol", "older", attachments=(
                 Attachment(4, UUIDS[4], memory_used_bytes=2 << 30, sm_util_pct=30.0),)))
    undescribed = TracedProcess(pid=UNDESCRIBED_PID, session="gridscene000002", name="older", cupti_status="ok")
    return SnapshotPart(source="scene", host=HostInfo(hostname="grid-scene", driver_version="580.159.04",
                                                      nvml_version="13.580.159.04", cuda_driver_version="13.0"),
                        devices=tuple(_device(i) for i in range(5)), processes=procs,
                        traced=(_traced(now_us), undescribed))


@hookimpl
def start_collecting(context) -> None:
    context.slots[SLOT] = scene(time.time())
    context.notify()


@hookimpl
def produce_snapshot(context) -> SnapshotPart | None:
    return context.slots.get(SLOT)
