"""Benchmark: how long ``gpuflow open`` takes to read a trace, against writing the same trace.

    python bench/open_trace.py [--spans 200000] [--repeat 3]

The trace is ``bench/export.py``'s record mix (8 traced processes, kernels on 4 named streams,
copies and memsets), written by GPUFlow's exporter with the compiled slice encoder into a
temporary file; then the recording collector's load of it (``gpuflow.collectors.recording.loading.load``:
the file read, decoded by the pure-Python reader ``gpuflow.export.trace_read`` into the span
columns, and each lane indexed for windows) is timed. Both side by side in one run, each best of
``--repeat``; the file is removed.

Last line: ``open_spans_per_s=<n> write_spans_per_s=<n> write_vs_open=<ratio> bytes_per_span=<b>
open_s_per_gib=<s>``: how many times faster the trace is written than opened, and how long a
file of the default --max-mb range would take (seconds per GiB of trace).

Constraints: no GPU; memory about twice the file (its bytes while read, then the columns).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from export import record_mix, spans_in, write_with_writer

from gpuflow.collectors.recording.loading import load


def best(seconds: list[float]) -> float:
    return min(seconds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spans", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    parts = record_mix(a.spans)
    n = spans_in(parts)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "mix.perfetto-trace")
        writes, opens = [], []
        for _ in range(a.repeat):
            started = time.perf_counter()
            size = write_with_writer(parts, path)
            writes.append(time.perf_counter() - started)
            started = time.perf_counter()
            recording = load(path, 1 << 40)
            opens.append(time.perf_counter() - started)
            assert recording.contents.executions == n, (recording.contents.executions, n)
            del recording
    write_rate, open_rate = n / best(writes), n / best(opens)
    print(f"{n:,} executions, {size / 2**20:.1f} MiB: written in {best(writes):.3f} s, opened in {best(opens):.3f} s "
          f"(best of {a.repeat})")
    print(f"open_spans_per_s={open_rate:.0f} write_spans_per_s={write_rate:.0f} write_vs_open={write_rate / open_rate:.1f} "
          f"bytes_per_span={size / n:.1f} open_s_per_gib={best(opens) * 2**30 / size:.0f}")


if __name__ == "__main__":
    main()
