"""Compare what demo_workload printed with what the injected library wrote to its ring.

What it is for: the producer-side check on a real GPU (no agent, no decoder involved):

    CUDA_INJECTION64_PATH=.../libgpuflow_inject.so GPUFLOW_CUPTI_PATH=$CUPTI \\
    NVTX_INJECTION64_PATH=$CUPTI python3 tests/support/ringcatch.py rings -- ./demo_workload 200 > demo.txt
    PYTHONPATH=tests/support python3 tests/inject/gpu_compare.py demo.txt rings/ring-<pid>.bin

prints a JSON report and, last, `counts_exact=<yes|no>`; exit status 0 only when every kernel
count (by mangled name), every copy count and byte total per direction, the three NVTX stream
names and the null stream's context record all match, with nothing dropped. Standard library
and tests/support/ringread.py (which needs an installed GPUFlow) only.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ringread import read_ring

COPY_KINDS = {1: "h2d", 2: "d2h", 8: "d2d", 10: "p2p"}


def demo_counts(text: str) -> dict:
    block = text.split("==== gpuflow-demo-counts ====\n", 1)[1].split("==== end ====", 1)[0]
    kernels, copies = {}, {}
    for line in block.splitlines():
        kind, rest = line.split(" ", 1)
        if kind == "kernel":
            mangled, count, _ = rest.split(" ", 2)
            kernels[mangled] = int(count)
        elif kind == "copy":
            direction, count, nbytes = rest.split()
            copies[direction] = [int(count), int(nbytes)]
    return {"kernels": kernels, "copies": copies}


def ring_counts(name: str) -> dict:
    rd = read_ring(name)
    kernels: dict[str, int] = {}
    copies: dict[str, list[int]] = {}
    for r in rd.records:
        if r["type"] == 1:
            kernels[r["name"]] = kernels.get(r["name"], 0) + 1
        elif r["type"] in (2, 3):
            key = "memset" if r["type"] == 3 else COPY_KINDS.get(r["copy_kind"], str(r["copy_kind"]))
            c = copies.setdefault(key, [0, 0])
            c[0] += 1
            c[1] += r["bytes"]
    streams = {r["stream"]: r["name"] for r in rd.of_type(5)}
    contexts = [(r["device"], r["context"], r["stream"]) for r in rd.of_type(6)]
    kernel_streams = sorted({r["stream"] for r in rd.of_type(1)})
    syncs = rd.of_type(7)
    # wall time of the last activity end, through the first CLOCK_SYNC pair
    ends = [r["end"] for r in rd.records if r["type"] in (1, 2, 3) and r["end"]]
    last_end_wall = syncs[0]["end"] + (max(ends) - syncs[0]["start"]) if syncs and ends else None
    no_timing = sum(1 for r in rd.records if r["type"] in (1, 2, 3) and r["flags"] & 0x10)
    bad_spans = sum(1 for r in rd.records if r["type"] in (1, 2, 3) and r["end"] < r["start"])
    return {"kernels": kernels, "copies": copies, "streams": streams, "contexts": contexts,
            "kernel_streams": kernel_streams, "no_timing": no_timing, "bad_spans": bad_spans,
            "devices": [r.get("name") for r in rd.of_type(8)],
            "clock_syncs": len(syncs), "last_end_wall_ns": last_end_wall, "header": rd.header}


def main(demo_path: str, ring: str) -> int:
    want = demo_counts(Path(demo_path).read_text())
    got = ring_counts(ring)
    h = got["header"]
    null_streams = {c[2] for c in got["contexts"]}
    checks = {
        "kernels": want["kernels"] == got["kernels"],
        "copies": {k: v for k, v in want["copies"].items() if v[0]} == got["copies"],
        "stream_names": sorted(got["streams"].values()) == ["compute", "offload_d2h",
                                                            "prefetch_h2d"],
        "null_stream_context": bool(null_streams & set(got["kernel_streams"])),
        "nothing_dropped": h["dropped_ring"] == 0 and h["dropped_cupti"] == 0,
        "timing": got["no_timing"] == 0 and got["bad_spans"] == 0,
        "status_ok": h["status"] == 1,
        "exited": h["producer_exited"] == 1,
        # mapped through the clock pair, the last span ends after the ring was created and
        # before the file was read (now)
        "clock_mapping": got["last_end_wall_ns"] is not None
        and h["started_wall_ns"] < got["last_end_wall_ns"] < time.time_ns(),
    }
    report = {"checks": checks, "want": want, "got": {k: v for k, v in got.items()
                                                      if k != "header"},
              "header": {k: v for k, v in h.items() if k != "magic"}}
    print(json.dumps(report, indent=1, sort_keys=True, default=str))
    ok = all(checks.values())
    print(f"counts_exact={'yes' if ok else 'no'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
