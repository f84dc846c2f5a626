"""The GPU check's `occupancy` stage without a GPU: bench/workloads/occupancy_kernels.cu compiles
cleanly with nvcc (and, with no GPU, says which call failed and exits 1), and
scripts/gpu_occupancy.py's ``check`` judges a workload's printed lines and a summary as the stage
will on the H200: equal figures give occupancy_exact=yes, and each way of being wrong (a driver
figure that differs, a kernel missing from the trace, a traced grid that is not the printed one,
a device value unlike occupancy.py's table) gives no and says what. The H200 lines below are
what the rules give by hand (docs/occupancy.md); the stage itself compares with the driver.

nvcc missing skips the compile test only when CI is not set: CI has the toolkit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cuda_toolkit import nvcc

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "bench" / "workloads" / "occupancy_kernels.cu"
SCRIPT = ROOT / "scripts" / "gpu_occupancy.py"

H200_DEVICE = ("device cc=9.0 sms=132 max_threads_per_sm=2048 max_threads_per_block=1024 regs_per_sm=65536 "
               "regs_per_block=65536 shared_per_sm=233472 shared_per_block=49152 shared_optin=232448 "
               "reserved=1024 name=NVIDIA H200")
#: (name, grid, block, registers, static, dynamic, optin, carveout, cache, expected limiter, blocks/SM)
H200_KERNELS = [
    ("occ_registers", 528, 256, 127, 0, 0, 0, -1, 0, "registers", 2),      # 4,096 a warp: 16 warps
    ("occ_dynamic_shared", 528, 128, 14, 0, 102400, 1, -1, 0, "shared_memory", 2),   # 101 KiB a block
    ("occ_carveout", 1056, 64, 11, 0, 12288, 0, 25, 0, "shared_memory", 4),  # 64 KiB carve-out / 13 KiB
    ("occ_tiny_blocks", 12672, 32, 10, 0, 0, 0, -1, 0, "blocks", 32),
    ("occ_tail_wave", 529, 1024, 10, 0, 0, 0, -1, 0, "warps", 2),
]




def test_the_workload_compiles_cleanly_and_without_a_gpu_names_the_failing_call(tmp_path):
    out = tmp_path / "occupancy_kernels"
    done = subprocess.run([nvcc(), "-O2", "-Xcompiler", "-Wall", "-o", str(out), str(WORKLOAD)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower(), done.stderr
    bad = subprocess.run([str(out), "x"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "usage: occupancy_kernels" in bad.stderr
    ran = subprocess.run([str(out)], capture_output=True, text=True, timeout=120)
    if ran.returncode != 0:   # no GPU here (CI): a clear error naming the call
        assert ran.returncode == 1 and "occupancy_kernels: cudaGetDeviceProperties(&p, 0) failed" in ran.stderr
    else:
        assert "==== occupancy-kernels ====" in ran.stdout and ran.stdout.count("\nkernel ") >= 8


def workload_stdout(kernels=H200_KERNELS, device=H200_DEVICE) -> str:
    lines = ["==== occupancy-kernels ====", device]
    for name, grid, block, regs, static, dynamic, optin, carveout, cache, expect, driver in kernels:
        lines.append(f"kernel {name} grid={grid},1,1 block={block},1,1 registers={regs} static_shared={static} "
                     f"dynamic_shared={dynamic} optin={optin} carveout={carveout} cache={cache} cluster=0,1,1 "
                     f"expect={expect} driver_blocks_per_sm={driver}")
    return "\n".join(lines + ["==== end ===="]) + "\n"


def summary(kernels=H200_KERNELS, grids: dict | None = None, occupancy: dict | None = None) -> dict:
    entries, spans = [], []
    for seq, (name, grid, block, *_rest) in enumerate(kernels):
        entry = {"name": name, "mangled": name, "count": 1, "total_ns": 1000, "min_ns": 1000, "max_ns": 1000,
                 "timed": 1}
        if occupancy and name in occupancy:
            entry["occupancy"] = occupancy[name]
        entries.append(entry)
        spans.append({"seq": seq, "kind": "kernel", "start_us": seq, "dur_ns": 1000, "name": name,
                      "grid": list((grids or {}).get(name, (grid, 1, 1))), "block": [block, 1, 1],
                      "bytes": None, "direction": None})
    return {"traced": [{"kernels": entries, "lanes": [{"label": "default", "spans": spans}]}],
            "traced_retired": []}


def check(tmp_path, stdout: str, summary_doc: dict) -> tuple[int, list[str]]:
    (tmp_path / "stdout").write_text(stdout)
    (tmp_path / "summary.json").write_text(json.dumps(summary_doc))
    done = subprocess.run([sys.executable, str(SCRIPT), "check", str(tmp_path / "stdout"),
                           str(tmp_path / "summary.json")], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.splitlines()


def test_equal_figures_are_exact_and_every_kernel_is_reported(tmp_path):
    rc, lines = check(tmp_path, workload_stdout(), summary())
    assert rc == 0
    assert lines[-1] == "occupancy_exact=yes kernels=5 equal=5 inputs=printed limiters_as_designed=yes"
    assert lines[0] == "occupancy_device sm_90 sms=132 name=NVIDIA H200 values=same"
    tail = next(line for line in lines if line.startswith("occupancy_kernel occ_tail_wave "))
    assert "driver=2 computed=2 limiters=warps " in tail and "waves=2.0038" in tail and tail.endswith("equal=yes")


def test_a_driver_figure_that_differs_is_not_exact_and_named(tmp_path):
    kernels = [k[:-1] + (3,) if k[0] == "occ_registers" else k for k in H200_KERNELS]
    rc, lines = check(tmp_path, workload_stdout(kernels), summary())
    assert rc == 0 and lines[-1].startswith("occupancy_exact=no kernels=5 equal=4 ")
    assert "occupancy_failed occ_registers: computed 2 blocks per SM, the driver 3" in lines


def test_a_kernel_the_trace_lacks_or_launched_otherwise_is_a_failure(tmp_path):
    traced = summary(H200_KERNELS[1:], grids={"occ_carveout": (1000, 1, 1)})
    rc, lines = check(tmp_path, workload_stdout(), traced)
    assert rc == 0 and lines[-1].startswith("occupancy_exact=no ")
    assert "occupancy_failed occ_registers: the trace has 0 launches, not 1" in lines
    assert any(line.startswith("occupancy_failed occ_carveout: traced grid [1000, 1, 1]") for line in lines)


def test_a_device_value_unlike_the_table_is_a_failure(tmp_path):
    rc, lines = check(tmp_path, workload_stdout(device=H200_DEVICE.replace("reserved=1024", "reserved=0")), summary())
    assert rc == 0 and lines[-1].startswith("occupancy_exact=no ")
    assert "occupancy_failed device value reserved=0 table=1024" in lines


def test_the_summarys_own_launch_configuration_and_occupancy_are_used_when_it_has_them(tmp_path):
    recorded = {"occ_carveout": {"registers": 11, "static_shared_bytes": 0, "dynamic_shared_bytes": 12288,
                                 "carveout_requested": 25, "blocks_per_sm": 4}}
    rc, lines = check(tmp_path, workload_stdout(), summary(occupancy=recorded))
    assert rc == 0 and lines[-1].startswith("occupancy_exact=yes ") and "inputs=printed+summary" in lines[-1]
    recorded["occ_carveout"]["blocks_per_sm"] = 5
    rc, lines = check(tmp_path, workload_stdout(), summary(occupancy=recorded))
    assert "occupancy_failed occ_carveout: the summary's occupancy says 5 blocks per SM" in lines


def test_a_workload_output_without_its_block_is_refused(tmp_path):
    rc, lines = check(tmp_path, "no GPU\n", summary())
    assert rc == 1 and lines == ["occupancy_exact=no (the workload printed no '==== occupancy-kernels ====' block)"]
