"""samples_layout.py is Python's view of cupti_src/pm_samples.h: every number it states is the
header's, read from a program compiled from the header."""

from __future__ import annotations

import struct
import subprocess

from gpuflow.collectors.pmsampling import samples_layout as L


def test_every_number_matches_the_c_header(built):
    printed = dict(line.split() for line in subprocess.run([built["layout"]], capture_output=True, text=True,
                                                           check=True).stdout.splitlines())
    header = {k: int(v) for k, v in printed.items()}
    for name in ("MAGIC", "VERSION", "HEADER_SIZE", "RECORD_SIZE", "MIN_CAPACITY", "MAX_CAPACITY", "TEXT_MAX",
                 "CHIP_MAX", "DETAIL_MAX", "SLOTS", "HELLO_MAGIC", "HELLO_SIZE", "KIND_SAMPLE", "KIND_CLOCK",
                 "SLOT_COUNT", "STOPPED", "OK", "STARTING", "FLAG_CONTEXT_HELD", "FLAG_CLOCK_SUSPECT"):
        assert getattr(L, name) == header[name], name
    offsets = {k: v for k, v in header.items() if k.startswith("OFF_")}
    assert len(offsets) == 24
    for name, value in offsets.items():
        assert getattr(L, name.upper()) == value, name
    assert len(L.STATUSES) == header["STATUS_COUNT"]
    assert L.RECORD.size == L.RECORD_SIZE and struct.calcsize("<HHIQQ") == header["RECORD_VALUES"]
    assert L.METRICS.index("pm_warps_active_pct") == header["SLOT_WARPS_AVG"]
    assert L.METRICS.index("pm_pcie_write_bytes_per_s") == header["SLOT_PCIE_WRITE_BPS"]
    assert L.HELLO == struct.pack("<Q", header["HELLO_MAGIC"])


def test_uuid_text_is_nvmls_form_and_zero_is_unknown():
    assert L.uuid_text(bytes(range(0x10, 0x20))) == "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"
    assert L.uuid_text(bytes(16)) is None and L.uuid_text(b"short") is None
    assert L.status_name(7) == "no_privilege" and L.status_name(999) == "unknown status 999"
