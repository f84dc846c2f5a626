"""What the decoders keep per device and per launch configuration, shared by both twins.

Three complete aggregates sit beside the kernel and transfer totals (docs/decoder.md, "Devices,
configurations and busy time"):

* per kernel name, the launch configurations it ran with: up to :data:`CONFIGS_PER_NAME` of them
  by (device, block, registers per thread, launch id), each with its launches, timed launches,
  time and least and greatest grid (in blocks); launches in further configurations are counted
  together, exactly, as "more";
* per device a record's ``device`` names, the timed copies by (direction, host memory), for the
  achieved bandwidth: count, bytes, time;
* per device, the union of the timed kernels' intervals (GPU busy time): intervals not yet
  settled are kept merged and sorted; kernels are merged into them at merge points (every
  :data:`BUSY_MERGE_KERNELS` kernels noted on the device, and at the end of each drain() call),
  where more than :data:`BUSY_INTERVALS_MAX` intervals left settles the older ones; settling up
  to a time folds them into the busy total. A kernel reaching back before what was settled is
  "late": the part before is not added (it may overlap time already counted) and is reported.

Also the DEVICE record's facts (UUID, SM count, compute capability), which both twins turn into
the same plain values here.

Constraints: no I/O, no state; the numbers here bound what a hostile ring can make a decoder hold
(a test checks the compiled twin's constants against these).
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from gpuflow.collectors.cupti._layout import DIR_D2H, DIR_H2D, U64_MAX

#: launch configurations kept per kernel name (by first appearance); the launches of further ones
#: count together as "more"
CONFIGS_PER_NAME = 4
#: unsettled busy intervals kept per device (16 bytes each) at a merge point; more: the older ones
#: are settled, the newest BUSY_INTERVALS_MAX // 2 + 1 stay
BUSY_INTERVALS_MAX = 1024
#: a device's kernels are merged into its intervals every this many kernels noted on it (and at the
#: end of each drain() call): the merge points, which both twins keep alike
BUSY_MERGE_KERNELS = 2048
#: host memory of a copy (CUpti_ActivityMemoryKind of its host side: 1 pageable, 2 pinned)
MEMORY_CLASSES = ("pageable", "pinned", "other")
MEM_PAGEABLE, MEM_PINNED, MEM_OTHER = range(3)
#: the most SMs a device is believed to have (real ones have up to a few hundred); a DEVICE
#: record saying more, or 0, leaves the SM count unknown
MAX_SM_COUNT = 4096


def check_until(value: Any) -> int:
    """``settle``'s argument: a CUPTI time, an int in [0, 2^64) (TypeError / ValueError otherwise)."""
    until = operator.index(value)
    if not 0 <= until <= U64_MAX:
        raise ValueError(f"settle needs a CUPTI time in [0, 2**64), not {until}")
    return until


def check_stamp(value: Any) -> int:
    """``kernel_configs``' argument: a stamp it gave, an int in [0, 2^64)."""
    stamp = operator.index(value)
    if not 0 <= stamp <= U64_MAX:
        raise ValueError(f"kernel_configs needs a stamp in [0, 2**64), not {stamp}")
    return stamp


def memory_class(direction: int, src_kind: int, dst_kind: int) -> int:
    """The copy's host memory: the source of a host-to-device copy, the destination of a
    device-to-host one; every other direction (and any other memory kind) is "other"."""
    kind = src_kind if direction == DIR_H2D else dst_kind if direction == DIR_D2H else 0
    return MEM_PAGEABLE if kind == 1 else MEM_PINNED if kind == 2 else MEM_OTHER


class DeviceFacts(NamedTuple):
    """A DEVICE record's facts as the decoders report them (None: unknown)."""

    name_id: int
    uuid: str | None  #: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", NVML's form of the same bytes
    sm_count: int | None
    compute_capability: tuple[int, int] | None


def device_facts(name_id: int, uuid: bytes, sm_count: int, major: int, minor: int) -> DeviceFacts:
    """Plain values from a DEVICE record's raw fields: 0 (all-zero bytes) is unknown, and so is a
    value no device has (a compute capability of 100 or more, more SMs than MAX_SM_COUNT)."""
    text = None
    if any(uuid):
        h = uuid.hex()
        text = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
    sms = sm_count if 0 < sm_count <= MAX_SM_COUNT else None
    cc = (major, minor) if 0 < major < 100 and minor < 100 else None
    return DeviceFacts(name_id, text, sms, cc)


class DeviceActivity(NamedTuple):
    """One device's activity as the decoders report it (``activity()``)."""

    device: int
    settled_to_ns: int  #: CUPTI time up to which busy time is settled (0: nothing yet)
    busy_ns: int  #: the union of the kernels' intervals before ``settled_to_ns``
    late: int  #: kernels that reached back before what was settled when they arrived
    late_ns: int  #: their time before it (not in ``busy_ns``: an upper bound of what it misses)
    first_start_ns: int | None  #: the earliest timed kernel's start (None: none)
    last_end_ns: int | None  #: the latest timed kernel's end
    #: timed copies: ((direction index, memory class index, count, bytes, time ns), ...), those seen
    copies: tuple[tuple[int, int, int, int, int], ...]


class KernelConfig(NamedTuple):
    """One launch configuration of a kernel name (``kernel_configs()``)."""

    device: int
    block: tuple[int, int, int]
    registers: int
    launch_id: int  #: 0: no configuration recorded (shared memory unknown)
    count: int
    timed: int
    total_ns: int
    grid_min: int  #: the fewest blocks a launch of it had
    grid_max: int
