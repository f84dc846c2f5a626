"""Python's view of the sample ring's format, cupti_src/pm_samples.h (the one definition).

The numbers below are that header's; ``tests/pmsampling/test_layout.py`` compiles a program from
the header that prints them and compares. What each value slot becomes in the recorder (its
metric name and unit, as ``/api/history`` names it) and the bounds a value must keep to be
believed are defined here too, beside the slots.

Constraints: pure; no I/O.
"""

from __future__ import annotations

import struct

MAGIC = 0x31534D5057465047          # "GPFWPMS1"
VERSION = 1
HEADER_SIZE = 4096
RECORD_SIZE = 64
MIN_CAPACITY = 1024
MAX_CAPACITY = 1 << 20
TEXT_MAX = 64
CHIP_MAX = 32
DETAIL_MAX = 256
SLOTS = 10
HELLO_MAGIC = 0x31504D4F4C4C4548    # "HELLOMP1"
HELLO_SIZE = 8
HELLO = struct.pack("<Q", HELLO_MAGIC)

MIN_RING_BYTES = HEADER_SIZE + MIN_CAPACITY * RECORD_SIZE
MAX_RING_BYTES = HEADER_SIZE + MAX_CAPACITY * RECORD_SIZE

KIND_SAMPLE = 1
KIND_CLOCK = 2

FLAG_CONTEXT_HELD = 0x1
FLAG_CLOCK_SUSPECT = 0x2

#: gpuflow_pm_status, by number
STATUSES = ("starting", "ok", "no_driver", "no_device", "cupti_missing", "cupti_version", "unsupported",
            "no_privilege", "counters_busy", "cupti_error", "stopped")
STARTING, OK, STOPPED = 0, 1, 10

# -- the header's fields: (offset, struct format) ------------------------------------------------
OFF_MAGIC = 0
OFF_VERSION = 8
OFF_HEADER_SIZE = 12
OFF_RECORD_SIZE = 16
OFF_CAPACITY = 20
OFF_STATUS = 24
OFF_ERROR = 28
OFF_DEVICE_INDEX = 32
OFF_DEVICE_COUNT = 36
OFF_SM_COUNT = 40
OFF_SLOTS_COLLECTED = 44
OFF_INTERVAL_NS = 48
OFF_FLAGS = 56
OFF_UUID = 64
OFF_DEVICE_NAME = 80
OFF_CHIP_NAME = 144
OFF_SAMPLES_WRITTEN = 176
OFF_SAMPLES_DROPPED = 184
OFF_HW_OVERFLOWS = 192
OFF_DECODE_PASSES = 200
OFF_CPU_NS = 208
OFF_DETAIL = 224
OFF_HEAD = 512
OFF_TAIL = 576

#: one record: kind, valid bits, reserved, start, end, the value slots
RECORD = struct.Struct("<HHIQQ10f")
assert RECORD.size == RECORD_SIZE

#: what each value slot is in the recorder: (metric, unit, the least and greatest value believed).
#: "min"/"max" are the least and the greatest SM; the plain name is the mean across SMs.
PCT_BOUNDS = (0.0, 150.0)        # a counter can read a little over its nominal peak; not 1.5x
RATE_BOUNDS = (0.0, 1e13)        # 10 TB/s: far above any link
SLOT_METRICS: tuple[tuple[str, str, tuple[float, float]], ...] = (
    ("pm_sm_active_pct", "%", PCT_BOUNDS),
    ("pm_sm_active_min_pct", "%", PCT_BOUNDS),
    ("pm_sm_active_max_pct", "%", PCT_BOUNDS),
    ("pm_warps_active_pct", "%", PCT_BOUNDS),
    ("pm_warps_active_min_pct", "%", PCT_BOUNDS),
    ("pm_warps_active_max_pct", "%", PCT_BOUNDS),
    ("pm_dram_throughput_pct", "%", PCT_BOUNDS),
    ("pm_pcie_read_bytes_per_s", "bytes/s", RATE_BOUNDS),
    ("pm_pcie_write_bytes_per_s", "bytes/s", RATE_BOUNDS),
)
SLOT_COUNT = len(SLOT_METRICS)
METRICS = tuple(m for m, _u, _b in SLOT_METRICS)
#: in words, for the status line: what a slot left out of the one pass measured
SLOT_WORDS = ("SM active", "SM active (least SM)", "SM active (busiest SM)", "warps in flight",
              "warps in flight (least SM)", "warps in flight (busiest SM)", "DRAM throughput",
              "PCIe reads", "PCIe writes")

#: the longest a sample may be (a sampler at the longest interval, 1 s, with margin)
MAX_SAMPLE_NS = 10 * 1_000_000_000


def status_name(number: int) -> str:
    """The status's name, or "unknown status N" for a number the format does not define."""
    return STATUSES[number] if 0 <= number < len(STATUSES) else f"unknown status {number}"


def uuid_text(raw: bytes) -> str | None:
    """NVML's "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" form of a CUuuid, None when all zero."""
    if len(raw) != 16 or not any(raw):
        return None
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
