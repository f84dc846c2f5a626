"""The GPU check's `occupancy` stage: occupancy.py's blocks per SM against the driver's.

    python scripts/gpu_occupancy.py run <occupancy_kernels binary> <out dir>
    python scripts/gpu_occupancy.py check <workload stdout> <summary json>

``run`` runs bench/workloads/occupancy_kernels.cu under ``gpuflow run --summary-json`` (its stdout
and the summary are kept in the out directory, with ``occupancy.json``), then does what ``check``
does with them: for each kernel line of the workload's ``==== occupancy-kernels ====`` block,

* the trace must hold the kernel, launched once, with the grid and block the line prints (from
  the summary's kernels and spans);
* gpuflow/collectors/cupti/occupancy.py computes its blocks per SM from its launch configuration
  and the device's compute capability and SM count, and that must equal
  ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``'s, which the workload printed.

The launch configuration (registers, static and dynamic shared memory, opt-in, carve-out, cache
preference) is taken from the summary's kernel entry when it has an ``occupancy`` or ``launch``
object, and otherwise from the workload's line (the summary does not carry launch configurations
yet: the CUPTI collector will add them); the output says which (``inputs=summary|printed``).
Where the summary has an ``occupancy`` object its ``blocks_per_sm`` must equal the driver's too.
The device line's cudaDeviceProp values must equal occupancy.py's table for that compute
capability.

It prints ``occupancy_device ...``, one ``occupancy_kernel <name> driver=<n> computed=<n>
limiters=<a+b> designed=<limiter> occupancy_pct=<x> waves=<w> equal=<yes|no>`` per kernel,
``occupancy_failed <what>`` for each problem, and last ``occupancy_exact=<yes|no> kernels=<n>
equal=<n> inputs=<summary|printed> limiters_as_designed=<yes|no>``: yes when every kernel's
figures are equal and nothing failed. ``limiters_as_designed`` says whether each kernel is held by
the resource it was written to exhaust (a compiler that used fewer registers makes it no without
making the comparison wrong).

Exit status: 0 when the figures were compared (whatever occupancy_exact says), 1 when they could
not be (no GPU, the workload or gpuflow failed), 2 for bad arguments.

Constraints: standard library and GPUFlow's occupancy module only; a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpuflow.collectors.cupti.occupancy import ARCHITECTURES, LaunchConfig, Occupancy, launch_occupancy

BLOCK_OPEN, BLOCK_END = "==== occupancy-kernels ====", "==== end ===="
#: the device line's cudaDeviceProp fields and occupancy.py's names for them
DEVICE_FIELDS = {"max_threads_per_sm": "max_threads_per_sm", "max_threads_per_block": "max_threads_per_block",
                 "regs_per_sm": "regs_per_sm", "regs_per_block": "regs_per_block",
                 "shared_per_sm": "shared_per_sm", "shared_per_block": "shared_per_block",
                 "shared_optin": "shared_per_block_optin", "reserved": "reserved_shared_per_block"}


def fields(line: str) -> dict[str, str]:
    """``key=value`` words of a line (the device name, last, may hold spaces)."""
    head, _, name = line.partition(" name=")
    out = dict(word.split("=", 1) for word in head.split()[1:] if "=" in word)
    if name:
        out["name"] = name
    return out


def dims(text: str) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in text.split(","))
    return x, y, z


def parse_workload(stdout: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(the device line's fields, each kernel line's fields with its name) of the printed block."""
    if BLOCK_OPEN not in stdout:
        raise ValueError("the workload printed no '==== occupancy-kernels ====' block")
    block = stdout.split(BLOCK_OPEN, 1)[1].split(BLOCK_END, 1)[0]
    device, kernels = None, []
    for line in block.strip().splitlines():
        if line.startswith("device "):
            device = fields(line)
        elif line.startswith("kernel "):
            kernels.append({"kernel": line.split()[1], **fields(line[len("kernel "):])})
    if device is None or not kernels:
        raise ValueError("the workload's block has no device line or no kernel line")
    return device, kernels


def summary_kernels(summary: dict[str, Any]) -> tuple[dict[str, dict], dict[str, list[dict]]]:
    """Kernel entries by name, and each kernel name's spans, over every traced process."""
    entries: dict[str, dict] = {}
    spans: dict[str, list[dict]] = {}
    for t in summary.get("traced", []) + summary.get("traced_retired", []):
        for k in t.get("kernels", []):
            entries[k["name"]] = k
        for lane in t.get("lanes", []):
            for s in lane.get("spans", []):
                if s.get("kind") == "kernel" and s.get("name"):
                    spans.setdefault(s["name"], []).append(s)
    return entries, spans


def launch_inputs(line: dict[str, str], entry: dict | None) -> tuple[str, int, LaunchConfig]:
    """("summary" or "printed", registers, the launch configuration)."""
    recorded = entry and (entry.get("launch") or entry.get("occupancy"))
    if isinstance(recorded, dict) and "registers" in recorded:
        return "summary", int(recorded["registers"]), LaunchConfig(
            int(recorded["static_shared_bytes"]), int(recorded["dynamic_shared_bytes"]),
            int(recorded.get("shared_executed_bytes", 0)), int(recorded.get("shmem_limit_config", 0)),
            recorded.get("carveout_requested"), int(recorded.get("cache_config", 0)),
            tuple(recorded.get("cluster", (0, 0, 0))))
    carveout = int(line["carveout"])
    cluster = dims(line["cluster"])
    return "printed", int(line["registers"]), LaunchConfig(
        int(line["static_shared"]), int(line["dynamic_shared"]), 0, int(line["optin"]),
        None if carveout < 0 else carveout, int(line["cache"]), (0, 0, 0) if cluster[0] == 0 else cluster)


def compare(stdout: str, summary: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The stage's lines (last: occupancy_exact=...) and the figures for occupancy.json."""
    device, kernels = parse_workload(stdout)
    cc = tuple(int(v) for v in device["cc"].split("."))
    sms = int(device["sms"])
    lines, failed, figures = [], [], {"device": device, "kernels": []}
    arch = ARCHITECTURES.get(cc)
    if arch is None:
        failed.append(f"device compute capability {device['cc']} is not covered by occupancy.py")
    else:
        differ = [f"{k}={device[k]} table={getattr(arch, attr)}" for k, attr in DEVICE_FIELDS.items()
                  if int(device[k]) != getattr(arch, attr)]
        lines.append(f"occupancy_device {arch.name} sms={sms} name={device.get('name', '?')} "
                     f"values={'same' if not differ else 'differ'}")
        failed += [f"device value {d}" for d in differ]
    entries, spans = summary_kernels(summary)
    equal = 0
    sources, designed_ok = set(), True
    for line in kernels:
        name, grid, block = line["kernel"], dims(line["grid"]), dims(line["block"])
        entry = entries.get(name)
        if entry is None or entry.get("count") != 1:
            failed.append(f"{name}: the trace has {0 if entry is None else entry.get('count')} launches, not 1")
        for s in spans.get(name, []):
            if tuple(s.get("grid") or ()) != grid or tuple(s.get("block") or ()) != block:
                failed.append(f"{name}: traced grid {s.get('grid')} block {s.get('block')}, printed {grid} {block}")
        source, registers, config = launch_inputs(line, entry)
        sources.add(source)
        result = launch_occupancy(cc, sms, grid, block, registers, config)
        driver = int(line["driver_blocks_per_sm"])
        if not isinstance(result, Occupancy):
            failed.append(f"{name}: not available: {result.reason}")
            lines.append(f"occupancy_kernel {name} driver={driver} computed=none equal=no")
            continue
        same = result.blocks_per_sm == driver
        recorded = (entry or {}).get("occupancy")
        if isinstance(recorded, dict) and "blocks_per_sm" in recorded and recorded["blocks_per_sm"] != driver:
            same = False
            failed.append(f"{name}: the summary's occupancy says {recorded['blocks_per_sm']} blocks per SM")
        equal += same
        as_designed = line["expect"] in result.limiters
        designed_ok &= as_designed
        waves = "none" if result.waves is None else f"{result.waves:.4f}"
        text = (f"occupancy_kernel {name} driver={driver} computed={result.blocks_per_sm} "
                f"limiters={'+'.join(result.limiters)} designed={line['expect']} "
                f"occupancy_pct={100 * result.occupancy:.1f} waves={waves} registers={registers} "
                f"shared_per_block={result.limits.shared_per_block} carveout={result.limits.shared_per_sm} "
                f"equal={'yes' if same else 'no'}")
        if "driver_max_active_clusters" in line:
            text += f" driver_max_active_clusters={line['driver_max_active_clusters']}"
        lines.append(text)
        if not same:
            failed.append(f"{name}: computed {result.blocks_per_sm} blocks per SM, the driver {driver}")
        figures["kernels"].append({"name": name, "grid": grid, "block": block, "registers": registers,
                                   "driver_blocks_per_sm": driver, "blocks_per_sm": result.blocks_per_sm,
                                   "limiters": list(result.limiters), "designed": line["expect"],
                                   "occupancy": result.occupancy, "waves": result.waves,
                                   "limits": result.limits._asdict(), "inputs": source})
    lines += [f"occupancy_failed {f}" for f in failed]
    exact = not failed and equal == len(kernels)
    inputs = "+".join(sorted(sources)) or "none"
    lines.append(f"occupancy_exact={'yes' if exact else 'no'} kernels={len(kernels)} equal={equal} "
                 f"inputs={inputs} limiters_as_designed={'yes' if designed_ok else 'no'}")
    return lines, figures


def run(binary: str, out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    summary_path = out_dir / "summary_occupancy.json"
    done = subprocess.run([sys.executable, "-m", "gpuflow", "run", "--port", "0", "--no-summary",
                           "--summary-json", str(summary_path), "--", binary],
                          capture_output=True, text=True, timeout=300)
    (out_dir / "occupancy.stdout").write_text(done.stdout)
    sys.stderr.write(done.stderr)
    if done.returncode != 0 or not summary_path.exists():
        print(f"occupancy_exact=no (the workload under gpuflow run exited {done.returncode})")
        return 1
    return check(done.stdout, summary_path, out_dir / "occupancy.json")


def check(stdout: str, summary_path: Path, json_out: Path | None = None) -> int:
    try:
        lines, figures = compare(stdout, json.loads(summary_path.read_text()))
    except (ValueError, KeyError, OSError) as exc:
        print(f"occupancy_exact=no ({exc})")
        return 1
    print("\n".join(lines))
    if json_out is not None:
        json_out.write_text(json.dumps(figures, indent=1))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "run":
        return run(argv[1], Path(argv[2]))
    if len(argv) == 3 and argv[0] == "check":
        return check(Path(argv[1]).read_text(), Path(argv[2]))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
