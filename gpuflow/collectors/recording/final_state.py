"""The snapshot part of a recording: its GPUs, processes and traced processes as they stood at its end.

* **Traced processes**: one per process the trace holds executions of, ``exited`` (nothing of a
  recording runs now; its exit status is not in the trace: unknown), with the aggregates of
  every execution the recording holds (kernels by name: launches, total, least and greatest
  time; transfers by direction: count, bytes, time), and per lane its newest
  :data:`LANE_SAMPLE` executions, as the live view samples a lane. A trace keeps kernels'
  demangled names only, so a kernel's mangled name is its demangled one.
* **GPUs**: every GPU the trace names: those it describes (index, name, memory total, power
  limit: the GPUs the agent showed when it wrote the trace), and the indexes its lanes give
  ("GPU 0") and the uuids its readings give ("GPU-…"). A trace written before GPUFlow described
  its GPUs does not say which uuid an index has: where it names exactly one of each they are the
  same GPU; otherwise a GPU known only by index has the uuid ``recorded-gpu-<index>`` and one
  known only by uuid the next index after the others (the recording's Problem says so). Its
  readings are the last ones the trace holds, where they are recent at the end (within twice the
  series' resolution and half a second, as the page judges a reading), else not available; a
  fact the trace does not describe is not available.
* **Processes**: each process with a reading on a GPU recent at the end, with those readings.
* **Problems**: one ``info`` line that says this is a recording, of which file and range, and not
  live; one more where the trace held slices its columns cannot (unknown kinds) or GPUs whose
  index and uuid could not be told apart.

Constraints: built once, when the recording is read; a pass over each lane's columns for the
aggregates, no Python object per execution kept.
"""

from __future__ import annotations

import collections
import math
import os
import time
from typing import Iterable

from gpuflow.collectors.recording.loading import Recording
from gpuflow.core.recorded import NONE, ProcessWindow, Series
from gpuflow.core.snapshot import (
    SPAN_KINDS, TRANSFER_DIRECTIONS, Attachment, Device, KernelStat, Lane, Problem, Process, SnapshotPart,
    TracedProcess, TransferStat, kernel_order,
)

#: executions of a lane the snapshot carries (the newest), as the live view's lane sample
LANE_SAMPLE = 512
#: a reading is recent at the end when no older than this many of its resolutions, and half a second
STALE_RESOLUTIONS, STALE_SLACK_S = 2.0, 0.5
_DEVICE_READINGS = ("utilization_gpu_pct", "utilization_memory_pct", "memory_used_bytes", "temperature_c",
                    "power_draw_w", "clock_sm_mhz", "clock_mem_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
_PROCESS_READINGS = ("memory_used_bytes", "sm_util_pct", "mem_util_pct")
_WHOLE_NUMBERS = {"memory_used_bytes", "clock_sm_mhz", "clock_mem_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"}
_KERNEL, _MEMSET = SPAN_KINDS.index("kernel"), SPAN_KINDS.index("memset")
_MEMSET_DIRECTION = TRANSFER_DIRECTIONS.index("memset")


def _clock(t: float | None) -> str:
    if t is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"


def _at_end(s: Series, end_s: float) -> float | None:
    """The series' last value, where it is recent at ``end_s`` and available."""
    if not len(s.t_s) or s.t_s[-1] < end_s - STALE_RESOLUTIONS * s.resolution_s - STALE_SLACK_S:
        return None
    value = s.value[-1]
    return value if math.isfinite(value) else None


def _reading(metric: str, value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(round(value)) if metric in _WHOLE_NUMBERS else value


def traced_process(p: ProcessWindow, path: str, now_s: float) -> TracedProcess:
    """A recorded process as the snapshot's TracedProcess: exited, its aggregates, its lane samples."""
    kernels: dict[str, list[int]] = {}   # name -> [count, total, least, greatest]
    transfers: dict[int, list[int]] = {}   # direction -> [count, bytes, total]
    lanes, records = [], 0
    shown_from = shown_to = None
    for lane in p.lanes:
        c = lane.spans
        assert c is not None
        names = c.names
        for kind, name, dur, nbytes, direction in zip(c.kind, c.name, c.dur_ns, c.bytes, c.direction):
            if kind == _KERNEL:
                key = names[name] if name != NONE else "(unnamed kernel)"
                k = kernels.get(key)
                if k is None:
                    kernels[key] = [1, dur, dur, dur]
                else:
                    k[0] += 1
                    k[1] += dur
                    if dur < k[2]:
                        k[2] = dur
                    if dur > k[3]:
                        k[3] = dur
                continue
            if kind == _MEMSET:
                direction = _MEMSET_DIRECTION
            if 0 <= direction < len(TRANSFER_DIRECTIONS):
                t = transfers.setdefault(direction, [0, 0, 0])
                t[0] += 1
                t[1] += max(nbytes, 0)
                t[2] += dur
        records += len(c)
        sample = c[-LANE_SAMPLE:]
        lanes.append(Lane(device=lane.device, context=lane.context, stream=lane.stream, label=lane.label,
                          executions=len(c), spans_elided=len(c) - len(sample), spans=sample))
        if len(sample):
            lo = min(sample.start_us)
            hi = max(s + d // 1000 for s, d in zip(sample.start_us, sample.dur_ns))
            shown_from = lo if shown_from is None else min(shown_from, lo)
            shown_to = hi if shown_to is None else max(shown_to, hi)
    stats = sorted((KernelStat(name=name, mangled=name, count=n, total_ns=total, min_ns=least, max_ns=greatest, timed=n)
                    for name, (n, total, least, greatest) in kernels.items()), key=kernel_order)
    moved = tuple(TransferStat(direction=TRANSFER_DIRECTIONS[d], count=n, bytes=nbytes, total_ns=total, timed=n)
                  for d, (n, nbytes, total) in sorted(transfers.items()))
    return TracedProcess(
        pid=p.pid, session=p.session, name=p.name, state="exited", exit_status=None, cupti_status="ok",
        cupti_detail=f"recorded: read from {os.path.basename(path)} (gpuflow open); not live",
        records=records, kernels=tuple(stats), transfers=moved, lanes=tuple(lanes),
        window_start_us=shown_from, window_end_us=shown_to,
        behind_live_ms=(now_s - shown_to / 1e6) * 1000 if shown_to is not None else None)


def _gpus(recording: Recording) -> tuple[dict[str, int], list[int], bool]:
    """Which index each uuid has, the indexes known only from lanes, and whether any index and
    uuid could not be paired. A GPU the trace describes has its own index (unless two claim one:
    then neither is believed); of the rest, one index and one uuid are one GPU."""
    described = recording.contents.gpus
    claims = collections.Counter(f.index for f in described.values())
    by_uuid = {uuid: f.index for uuid, f in described.items() if claims[f.index] == 1}
    indexes = sorted({lane.device for p in recording.contents.processes for lane in p.lanes} - set(by_uuid.values()))
    uuids = sorted({s.entity[1] if s.entity[0] == "device" else s.entity[2] for s in recording.readings.series
                    if len(s.entity) >= 2 and s.entity[0] in ("device", "process")} - set(by_uuid) - {""})
    if len(indexes) == 1 and len(uuids) == 1:
        return {**by_uuid, uuids[0]: indexes[0]}, [], False
    after = max(indexes + list(by_uuid.values()), default=-1) + 1
    return {**by_uuid, **{u: after + i for i, u in enumerate(uuids)}}, indexes, bool(indexes and uuids)


def _devices(recording: Recording, by_uuid: dict[str, int], index_only: Iterable[int], end_s: float) -> list[Device]:
    found = []
    for uuid, index in by_uuid.items():
        values: dict[str, object] = {}
        facts = recording.contents.gpus.get(uuid)
        if facts is not None:
            values.update(name=facts.name, memory_total_bytes=facts.memory_total_bytes,
                          power_limit_w=facts.power_limit_w)
        for s in recording.readings.series:
            if s.entity == ("device", uuid) and s.metric in _DEVICE_READINGS:
                values[s.metric] = _reading(s.metric, _at_end(s, end_s))
        found.append(Device(index=index, uuid=uuid, **values))  # type: ignore[arg-type]
    found.extend(Device(index=i, uuid=f"recorded-gpu-{i}") for i in index_only)
    return sorted(found, key=lambda d: d.index)


def _processes(recording: Recording, by_uuid: dict[str, int], end_s: float) -> list[Process]:
    names = {p.pid: p.name for p in recording.contents.processes}
    held: dict[int, dict[str, dict[str, float | int | None]]] = {}
    for s in recording.readings.series:
        if len(s.entity) == 3 and s.entity[0] == "process" and s.metric in _PROCESS_READINGS and s.entity[1].isdigit():
            value = _at_end(s, end_s)
            if value is not None and s.entity[2] in by_uuid:
                held.setdefault(int(s.entity[1]), {}).setdefault(s.entity[2], {})[s.metric] = _reading(s.metric, value)
    return [Process(pid=pid, name=names.get(pid), attachments=tuple(
                Attachment(device_index=by_uuid[uuid], device_uuid=uuid, **values) for uuid, values in sorted(
                    gpus.items(), key=lambda item: by_uuid[item[0]])))
            for pid, gpus in sorted(held.items())]


def summary(recording: Recording) -> str:
    """One line: that this is a recording, of which file, over which range, and what it holds."""
    c = recording.contents
    span = ""
    if recording.start_s is not None and recording.end_s is not None:
        length = recording.end_s - recording.start_s
        span = f", {_clock(recording.start_s)} – {_clock(recording.end_s)} ({length:.1f} s)"
    held = f"{c.executions:,} executions of {len(c.processes)} traced process(es), {len(c.series)} reading series"
    return f"recording of {os.path.basename(recording.path)}{span}, not live: {held} (gpuflow open)"


def final_part(recording: Recording, source: str, now_s: float) -> SnapshotPart:
    """The recording's snapshot part (see the module)."""
    end_s = recording.end_s if recording.end_s is not None else now_s
    by_uuid, index_only, unpaired = _gpus(recording)
    problems = [Problem(source, summary(recording), "info")]
    c = recording.contents
    if c.other_kinds or c.other_events:
        problems.append(Problem(source, f"the trace holds {c.other_kinds:,} slice(s) of unknown kinds and "
                                        f"{c.other_events:,} other event(s), which a recording cannot show: left out",
                                "info"))
    if unpaired:
        problems.append(Problem(source, "the trace does not say which of its GPUs' uuids (from readings) belongs to "
                                        "which GPU index (from streams): they are shown apart", "info"))
    return SnapshotPart(
        source=source,
        devices=tuple(_devices(recording, by_uuid, index_only, end_s)),
        processes=tuple(_processes(recording, by_uuid, end_s)),
        traced=tuple(traced_process(p.window, recording.path, now_s) for p in recording.processes),
        problems=tuple(problems))
