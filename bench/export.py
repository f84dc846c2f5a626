"""Benchmark: how fast a retained window becomes a Perfetto file, by each candidate writer.

    python bench/export.py [--spans 1000000] [--sample 100000] [--repeat 3] [--launches]

The window is ``bench/agent_rss.py``'s record mix, as a retaining collector would answer it
(:class:`gpuflow.core.recorded.WindowPart`): 8 traced processes, each with kernels on 4 named
streams (~200 distinct long C++ names, 12 of them hot; 2-202 µs, back to back with gaps of
0-3 µs), copies on the null stream (h2d, d2h, d2d; overlapping, as copies issued in one
millisecond are) and memsets on the kernel streams: 85 / 12 / 3 %. With ``--launches`` each lane
also comes with its kernels' launch configurations, as the CUPTI collector answers (a launch id
per span, one configuration's figures per name: every kernel slice carries its occupancy,
limiter, blocks per SM and waves; without, each says "not available"). Every writer writes the
same slices with the same arguments, interned names, tracks and counters-free, to a file:

* ``compiled`` — :class:`gpuflow.export.perfetto.TraceWriter` with the compiled slice encoder
  (``gpuflow.export._slices_c``), over ``--spans`` spans;
* ``python`` — the same writer with the pure-Python twin (``_slices_py``), over ``--sample``
  spans (it is far slower; the rate is per span);
* ``trace_proto_builder`` — the ``perfetto`` package's ``TraceProtoBuilder`` (protobuf message
  objects, the official generated classes), the same packets, over ``--sample`` spans; skipped
  (``n/a``) where the package is not installed. It writes the arguments the format had when it
  chose the compiled writer (seq, duration, grid, block, bytes, direction), not the occupancy and
  bandwidth ones: its rate is an upper bound of what it would do with them.

Each is timed ``--repeat`` times, best kept, side by side in one run; the file is written to a
temporary folder and removed. :func:`export_spans_per_s` is the compiled figure alone, for
``bench/recorder.py``'s last line.

Last line: ``export_spans_per_s=<compiled> python_twin_spans_per_s=<n> trace_proto_builder_spans_per_s=<n|n/a>
compiled_vs_python=<ratio> compiled_vs_builder=<ratio|n/a> bytes_per_span=<b>``; goal
export_spans_per_s >= 2,000,000 on this 2-core machine.

Constraints: no GPU; memory about 110 bytes per span for the columns and the file's pieces.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from array import array
from typing import Callable

from dataclasses import replace

from gpuflow.core.recorded import LaneWindow, LaunchFigures, ProcessWindow, SpanColumns, WindowPart
from gpuflow.export import _slices_py, slices
from gpuflow.export.perfetto import SUFFIX, TraceWriter, lane_track_name

T0_US = 1_764_000_000_000_000
PROCESSES = 8
FAMILIES = ("at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
            "cutlass::Kernel<cutlass::gemm::kernel::Gemm<cutlass::gemm::threadblock::MmaPipelined<"
            "cutlass::gemm::GemmShape<128, 128, 8> > > >",
            "at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
            "at::native::sum_functor<float, float, float> > > >",
            "flash_fwd_splitkv_kernel_v2<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
            "cutlass::bfloat16_t>, true, false>(Flash_fwd_params)",
            "thrust::cuda_cub::core::_kernel_agent<thrust::cuda_cub::__reduce::ReduceAgent>")
NAMES = tuple(f"{FAMILIES[i % 5]}#{i}" for i in range(200))
_FIELDS = ("seq", "start_us", "dur_ns", "kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
           "block_z", "bytes", "direction")


def record_mix(spans: int, seed: int = 1) -> tuple[WindowPart, ...]:
    """``spans`` executions in agent_rss.py's mix, over 8 processes (one collector's answer)."""
    rng = random.Random(seed)
    processes = []
    per_process = spans // PROCESSES
    for p in range(PROCESSES):
        lanes = {s: {f: array("q") for f in _FIELDS} for s in (7, 13, 14, 15, 16)}
        cursor = {s: T0_US * 1000 for s in (13, 14, 15, 16)}
        now = T0_US * 1000
        for seq in range(per_process):
            now += 1000  # ~ the producer's pace: one record a microsecond
            r = rng.randrange(1000)
            if r < 850:
                s = 13 + rng.randrange(4)
                n = rng.randrange(200) if rng.randrange(4) == 0 else rng.randrange(12)
                dur = 2000 + rng.randrange(200000)
                cursor[s] += dur + rng.randrange(3000)
                row = (seq, cursor[s] // 1000, dur, 0, n, 128 + rng.randrange(4096), 1, 1, 256, 1, 1, -1, -1)
            elif r < 970:
                s, nbytes = 7, 4096 << rng.randrange(12)
                row = (seq, now // 1000, nbytes // 20, 1, -1, -1, -1, -1, -1, -1, -1, nbytes, rng.randrange(3))
            else:
                s = 13 + rng.randrange(4)
                row = (seq, now // 1000, 1500, 2, -1, -1, -1, -1, -1, -1, -1, 1 << 20, 5)
            for f, v in zip(_FIELDS, row):
                lanes[s][f].append(v)
        windows = tuple(
            LaneWindow(device=0, context=1, stream=s, label=("default", "compute", "comm", "prefetch", "aux")[i],
                       executions=len(cols["seq"]), spans=SpanColumns(**cols, names=NAMES))
            for i, (s, cols) in enumerate(sorted(lanes.items())))
        processes.append(ProcessWindow(pid=4000 + p, session=f"s{p}", name=f"train{p}",
                                       retained_from_s=T0_US / 1e6, retained_to_s=T0_US / 1e6 + 60,
                                       lanes=windows))
    return (WindowPart(source="bench", processes=tuple(processes)),)


def with_launches(parts: tuple[WindowPart, ...]) -> tuple[WindowPart, ...]:
    """The same windows, each lane with a launch id per kernel (1) and one configuration's figures
    per name (occupancy 12.5-100 %, limiters and waves varying by name), as the CUPTI collector
    gives them."""
    limiters = ("registers", "shared_memory", "warps", "blocks", "warps+blocks")

    def lane(w: LaneWindow) -> LaneWindow:
        c = w.spans
        assert c is not None
        figures = tuple((LaunchFigures(1, (256, 1, 1), occupancy_pct=12.5 * (1 + i % 8), blocks_per_sm=1 + i % 8,
                                       limiters=limiters[i % 5], wave_blocks=132 * (1 + i % 8)),)
                        for i in range(len(c.names)))
        return replace(w, launch_ids=array("q", (1 if k == 0 else -1 for k in c.kind)), launches=figures)

    return tuple(replace(part, processes=tuple(replace(p, lanes=tuple(map(lane, p.lanes))) for p in part.processes))
                 for part in parts)


def spans_in(parts: tuple[WindowPart, ...]) -> int:
    return sum(len(lane.spans) for part in parts for p in part.processes for lane in p.lanes if lane.spans)


def write_with_writer(parts: tuple[WindowPart, ...], path: str) -> int:
    """GPUFlow's writer, with whichever encoder gpuflow.export.slices holds now; bytes written."""
    with open(path, "wb") as fh:
        writer = TraceWriter(fh.write)
        writer.header()
        writer.window(parts)
        writer.finish()
        return fh.tell()


def write_with_builder(parts: tuple[WindowPart, ...], path: str) -> int:
    """The same trace through the perfetto package's TraceProtoBuilder (official classes)."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder
    from gpuflow.core.snapshot import TRANSFER_DIRECTIONS
    from gpuflow.export import slice_layout as L

    builder = TraceProtoBuilder()
    first = builder.add_packet()
    first.trusted_packet_sequence_id = L.SEQUENCE_ID
    first.sequence_flags = 3
    for iid, name in enumerate(L.CATEGORIES, 1):
        first.interned_data.event_categories.add(iid=iid, name=name)
    for iid, name in enumerate(L.FIXED_EVENT_NAMES, 1):
        first.interned_data.event_names.add(iid=iid, name=name)
    for iid, name in enumerate(L.ARG_NAMES, 1):
        first.interned_data.debug_annotation_names.add(iid=iid, name=name)
    names: dict[str, int] = {}
    uuid = 0
    for part in parts:
        for proc in part.processes:
            uuid += 1
            pkt = builder.add_packet()
            pkt.track_descriptor.uuid = uuid
            pkt.track_descriptor.process.pid = proc.pid
            pkt.track_descriptor.process.process_name = proc.name or ""
            parent = uuid
            for lane in proc.lanes:
                c = lane.spans
                uuid += 1
                pkt = builder.add_packet()
                pkt.track_descriptor.uuid = uuid
                pkt.track_descriptor.parent_uuid = parent
                pkt.track_descriptor.name = lane_track_name(lane)
                fresh = [n for n in c.names if n not in names]
                if fresh:
                    pkt = builder.add_packet()
                    pkt.trusted_packet_sequence_id = L.SEQUENCE_ID
                    for n in fresh:
                        names[n] = len(names) + L.FIRST_KERNEL_NAME_IID
                        pkt.interned_data.event_names.add(iid=names[n], name=n)
                for i in range(len(c)):
                    begin = c.start_us[i] * 1000
                    pkt = builder.add_packet()
                    pkt.timestamp = begin
                    pkt.trusted_packet_sequence_id = L.SEQUENCE_ID
                    pkt.sequence_flags = 2
                    ev = pkt.track_event
                    ev.type = 1
                    ev.track_uuid = uuid
                    kind = c.kind[i]
                    ev.category_iids.append(kind + 1)
                    ann = ev.debug_annotations.add(name_iid=L.ARG_SEQ, int_value=c.seq[i])
                    ann = ev.debug_annotations.add(name_iid=L.ARG_DUR_NS, int_value=c.dur_ns[i])
                    if kind == 0:
                        ev.name_iid = names[c.names[c.name[i]]]
                        for iid, col in zip(range(L.ARG_GRID_X, L.ARG_BLOCK_Z + 1),
                                            (c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z)):
                            ev.debug_annotations.add(name_iid=iid, int_value=col[i])
                    else:
                        ev.name_iid = L.NAME_MEMSET if kind == 2 else L.NAME_MEMCPY_DIRECTION + c.direction[i]
                        ev.debug_annotations.add(name_iid=L.ARG_BYTES, int_value=c.bytes[i])
                        ann = ev.debug_annotations.add(name_iid=L.ARG_DIRECTION)
                        ann.string_value = TRANSFER_DIRECTIONS[c.direction[i]]
                    end = builder.add_packet()
                    end.timestamp = begin + c.dur_ns[i]
                    end.trusted_packet_sequence_id = L.SEQUENCE_ID
                    end.track_event.type = 2
                    end.track_event.track_uuid = uuid
    data = builder.serialize()
    with open(path, "wb") as fh:
        fh.write(data)
    return len(data)


def best_rate(write: Callable[[tuple[WindowPart, ...], str], int], parts: tuple[WindowPart, ...],
              repeat: int) -> tuple[float, int]:
    """(spans per second, best of ``repeat``; bytes per file)."""
    n = spans_in(parts)
    best, size = float("inf"), 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench" + SUFFIX)
        for _ in range(repeat):
            t = time.perf_counter()
            size = write(parts, path)
            best = min(best, time.perf_counter() - t)
    return n / best, size


def with_encoder(module) -> Callable[[tuple[WindowPart, ...], str], int]:
    """write_with_writer, the writer's slice encoder swapped for ``module``'s while it runs."""
    def write(parts: tuple[WindowPart, ...], path: str) -> int:
        saved = (slices.LaneSlices, slices.encode_spans, slices.finish)
        slices.LaneSlices, slices.encode_spans, slices.finish = module.LaneSlices, module.encode_spans, module.finish
        try:
            return write_with_writer(parts, path)
        finally:
            slices.LaneSlices, slices.encode_spans, slices.finish = saved
    return write


def export_spans_per_s(spans: int = 1_000_000, repeat: int = 3) -> float:
    """The compiled writer's rate on the record mix (RuntimeError if it is not built)."""
    if slices.slices_c is None:
        raise RuntimeError(f"the compiled slice encoder is not built: {slices.EXTENSION_IMPORT_ERROR}")
    return best_rate(with_encoder(slices.slices_c), record_mix(spans), repeat)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--launches", action="store_true", help="lanes with their kernels' launch configurations")
    args = ap.parse_args()
    if slices.slices_c is None:
        raise SystemExit(f"the compiled slice encoder is not built: {slices.EXTENSION_IMPORT_ERROR}")
    whole, sample = record_mix(args.spans), record_mix(args.sample, seed=2)
    if args.launches:
        whole, sample = with_launches(whole), with_launches(sample)
    compiled, size = best_rate(with_encoder(slices.slices_c), whole, args.repeat)
    per_span = size / spans_in(whole)
    print(f"compiled: {compiled:,.0f} spans/s, {per_span:.1f} bytes/span, {size / 1e6:.1f} MB")
    python, _ = best_rate(with_encoder(_slices_py), sample, args.repeat)
    print(f"python twin: {python:,.0f} spans/s")
    try:
        import perfetto.trace_builder.proto_builder as proto_builder
    except ImportError:
        proto_builder = None
    builder: float | None = None
    if proto_builder is None:
        print("trace_proto_builder: the perfetto package is not installed")
    else:
        builder, built = best_rate(write_with_builder, sample, args.repeat)
        print(f"trace_proto_builder: {builder:,.0f} spans/s, {built / spans_in(sample):.1f} bytes/span")
    b = f"{builder:.0f}" if builder else "n/a"
    vs_b = f"{compiled / builder:.1f}" if builder else "n/a"
    print(f"export_spans_per_s={compiled:.0f} python_twin_spans_per_s={python:.0f} trace_proto_builder_spans_per_s={b} "
          f"compiled_vs_python={compiled / python:.1f} compiled_vs_builder={vs_b} bytes_per_span={per_span:.1f}")


if __name__ == "__main__":
    main()
