"""Checks for scripts/gpu-check: compare what gpuflow saw with what the workload says it did.

Subcommands (each prints a verdict line ``<name>=yes|no`` and details, exit 0 either way unless
the inputs are unreadable):

* ``demo DEMO_STDOUT SUMMARY_JSON`` — per-kernel (mangled name) launch counts and per-direction
  copy counts and bytes printed by examples/demo_workload.cu vs ``gpuflow run --summary-json``;
  also that the lanes carry the NVTX stream names and ``default``.
* ``patterns PATTERNS_STDOUT SUMMARY_JSON`` — the same for bench/workloads/launch_patterns.cu (a
  CUDA graph, four launching threads, the stream-ordered allocator, pageable copies, peer copies
  with two GPUs) and the lanes it lists (``lane <label>`` lines).
* ``torch PROFILE_JSON SUMMARY_JSON`` — per-kernel-name counts from torch.profiler (Kineto trace)
  vs gpuflow's, by demangled name.
* ``profiled LABEL PROFILE_JSON SUMMARY_JSON [N]`` — the same for any workload that writes such a
  profile (bench/workloads/nccl_allreduce.py: its ranks' counts summed); with N, exactly N
  traced processes with kernels.
* ``tree SUMMARY_JSON N`` — N traced processes, each with kernels.
* ``watch SNAPSHOT_JSON PID`` — the device's real readings and the process with memory and SM %.
* ``named LABEL STDOUT SUMMARY_JSON`` — a workload that names some of its kernels (a
  ``==== gpuflow-named-counts ====`` block of ``kernel <name> <count>``, bench/workloads/
  frameworks.py): gpuflow's count of each, by name, must equal it; the framework's other kernels
  are allowed. Also exit 0, no drops, CUPTI ok.
* ``linear LABEL SUMMARY_A STEPS_A SUMMARY_B STEPS_B`` — one program at two step counts whose
  kernels it does not name (JAX): every kernel's count must grow by a whole multiple of the extra
  steps, and some must grow.
* ``same_output LABEL BARE_STDOUT TRACED_STDOUT`` — the ``checksum`` lines run bare and under
  ``gpuflow run`` are the same.

Constraints: standard library only (runs on the GPU machine's Python).
"""

from __future__ import annotations

import collections
import json
import sys


def load(path: str):
    with open(path) as fh:
        return json.load(fh)


def gpuflow_kernels(summary, key: str) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for traced in summary["traced"] + summary.get("traced_retired", []):
        for k in traced["kernels"]:
            counts[k[key]] += k["count"]
    return dict(counts)


def gpuflow_transfers(summary) -> dict[str, tuple[int, int]]:
    totals: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for traced in summary["traced"] + summary.get("traced_retired", []):
        for t in traced["transfers"]:
            totals[t["direction"]][0] += t["count"]
            totals[t["direction"]][1] += t["bytes"]
    return {d: (c, b) for d, (c, b) in totals.items()}


def drops(summary) -> int:
    return sum(t["dropped_ring"] + t["dropped_cupti"]
               for t in summary["traced"] + summary.get("traced_retired", []))


def diff_counts(expected: dict[str, int], got: dict[str, int]) -> list[str]:
    lines = []
    for name in sorted(set(expected) | set(got)):
        if expected.get(name, 0) != got.get(name, 0):
            lines.append(f"  {name[:100]}: expected {expected.get(name, 0)}, gpuflow {got.get(name, 0)}")
    return lines


def block_lines(stdout_path: str, opening: str):
    """The lines of a workload's printed block: after a line starting ``==== <opening>``, up to
    ``==== end``."""
    inside = False
    for line in open(stdout_path):
        line = line.rstrip("\n")
        if line.startswith(f"==== {opening}"):
            inside = True
        elif line.startswith("==== end"):
            inside = False
        elif inside:
            yield line


def cmd_counts(label: str, stdout_path: str, summary_path: str, *lanes: str) -> bool:
    """A workload that prints the ``==== gpuflow-demo-counts ====`` block: its kernel counts by
    mangled name and copy counts and bytes by direction must equal gpuflow's, and each of
    ``lanes`` and of the block's ``lane <label>`` lines must be a lane label."""
    expected_kernels: dict[str, int] = {}
    lanes = list(lanes)
    expected_copies: dict[str, tuple[int, int]] = {}
    for line in block_lines(stdout_path, "gpuflow-demo-counts"):
        if line.startswith("kernel "):
            _, mangled, count, *_ = line.split(" ")
            expected_kernels[mangled] = int(count)
        elif line.startswith("copy "):
            _, direction, count, nbytes = line.split()
            if int(count):
                expected_copies[direction] = (int(count), int(nbytes))
        elif line.startswith("lane ") and line[5:] not in lanes:
            lanes.append(line[5:])
    summary = load(summary_path)
    got_kernels = gpuflow_kernels(summary, "mangled")
    got_copies = gpuflow_transfers(summary)
    problems = diff_counts(expected_kernels, got_kernels)
    for d in sorted(set(expected_copies) | set(got_copies)):
        if expected_copies.get(d) != got_copies.get(d):
            problems.append(f"  copies {d}: expected {expected_copies.get(d)}, gpuflow {got_copies.get(d)}")
    labels = sorted({lane["label"] for t in summary["traced"] for lane in t["lanes"]})
    for wanted in lanes:
        if wanted not in labels:
            problems.append(f"  no lane labelled {wanted!r} (labels: {labels})")
    print(f"{label}: {sum(expected_kernels.values())} kernels in {len(expected_kernels)} names expected, "
          f"gpuflow {sum(got_kernels.values())} in {len(got_kernels)}; copies {expected_copies} vs {got_copies}; "
          f"lanes {labels}; drops {drops(summary)}; exit {summary['exit_status']}")
    print("\n".join(problems))
    ok = not problems and summary["exit_status"] == 0 and bool(expected_kernels)
    print(f"{label}_counts_exact={'yes' if ok else 'no'}")
    return ok


def cmd_demo(stdout_path: str, summary_path: str) -> bool:
    return cmd_counts("demo", stdout_path, summary_path, "compute", "prefetch_h2d", "offload_d2h", "default")


def cmd_patterns(stdout_path: str, summary_path: str) -> bool:
    """bench/workloads/launch_patterns.cu: a CUDA graph, four launching threads, the
    stream-ordered allocator, pageable synchronous copies (and peer copies with two GPUs); it
    names its lanes itself."""
    return cmd_counts("patterns", stdout_path, summary_path)


def cmd_profiled(label: str, profile_path: str, summary_path: str, processes: str = "") -> bool:
    """Per-kernel-name counts from torch.profiler (Kineto trace; summed over a job's ranks) vs
    gpuflow's, by demangled name; with ``processes``, exactly that many traced processes must have
    kernels (each rank its own)."""
    expected = load(profile_path)["kernels"]
    summary = load(summary_path)
    got = gpuflow_kernels(summary, "name")
    problems = diff_counts(expected, got)
    with_kernels = [t for t in summary["traced"] + summary.get("traced_retired", []) if t["kernels"]]
    if processes and len(with_kernels) != int(processes):
        problems.append(f"  {len(with_kernels)} traced processes with kernels, expected {processes}")
    print(f"{label}: profiler {sum(expected.values())} kernels in {len(expected)} names, "
          f"gpuflow {sum(got.values())} in {len(got)} over {len(with_kernels)} traced processes; "
          f"drops {drops(summary)}; exit {summary['exit_status']}")
    print("\n".join(problems[:40]))
    ok = not problems and summary["exit_status"] == 0 and bool(expected)
    print(f"{label}_counts_exact={'yes' if ok else 'no'}")
    return ok


def cmd_torch(profile_path: str, summary_path: str) -> bool:
    return cmd_profiled("torch", profile_path, summary_path)


def cmd_tree(summary_path: str, n: str) -> bool:
    summary = load(summary_path)
    with_kernels = [t for t in summary["traced"] if t["kernels"]]
    print(f"tree: {len(summary['traced'])} traced processes, {len(with_kernels)} with kernels: "
          + ", ".join(f"pid {t['pid']} {t['name']} exit={t['exit_status']} state={t['state']}"
                      for t in summary["traced"]))
    ok = len(with_kernels) == int(n)
    print(f"tree_traced={'yes' if ok else 'no'}")
    return ok


def cmd_watch(snapshot_path: str, pid: str) -> bool:
    snap = load(snapshot_path)
    devices = snap["devices"]
    for d in devices:
        print(f"device [{d['index']}] {d['name']} util {d['utilization_gpu_pct']}% mem "
              f"{d['memory_used_bytes']}/{d['memory_total_bytes']} B temp {d['temperature_c']} C power "
              f"{d['power_draw_w']}/{d['power_limit_w']} W clocks {d['clock_sm_mhz']}/{d['clock_mem_mhz']} MHz "
              f"pcie tx/rx {d['pcie_tx_bytes_per_s']}/{d['pcie_rx_bytes_per_s']} B/s mig {d['mig_mode']}")
    print(f"host: {snap['host']}")
    procs = {p["pid"]: p for p in snap["processes"]}
    proc = procs.get(int(pid))
    if proc:
        for a in proc["attachments"]:
            print(f"process {pid} {proc['name']} user {proc['user']} cmdline {proc['cmdline']!r} on GPU "
                  f"{a['device_index']}: mem {a['memory_used_bytes']} B, SM {a['sm_util_pct']}%, "
                  f"mem util {a['mem_util_pct']}%, kind {a['kind']}")
    ok = bool(devices) and proc is not None and all(
        a["memory_used_bytes"] is not None and a["memory_used_bytes"] > 0 for a in proc["attachments"]) and \
        any(a["sm_util_pct"] is not None for a in proc["attachments"])
    print(f"watch_process_seen={'yes' if ok else 'no'}")
    return ok


def traced_problems(summary) -> list[str]:
    """What is wrong with a run regardless of its counts: exit status, drops, CUPTI status."""
    problems = []
    if summary["exit_status"] != 0:
        problems.append(f"  exit status {summary['exit_status']}")
    if drops(summary):
        problems.append(f"  {drops(summary)} records dropped")
    for t in summary["traced"] + summary.get("traced_retired", []):
        if t["kernels"] and t["cupti_status"] != "ok":
            problems.append(f"  pid {t['pid']}: CUPTI {t['cupti_status']} ({t['cupti_detail']})")
    if not any(t["kernels"] for t in summary["traced"] + summary.get("traced_retired", [])):
        problems.append("  no traced process with kernels")
    return problems


def named_counts(stdout_path: str) -> dict[str, int]:
    expected: dict[str, int] = {}
    for line in block_lines(stdout_path, "gpuflow-named-counts"):
        if line.startswith("kernel "):
            _, name, count = line.split(" ")
            expected[name] = int(count)
    return expected


def cmd_named(label: str, stdout_path: str, summary_path: str) -> bool:
    expected = named_counts(stdout_path)
    summary = load(summary_path)
    got = gpuflow_kernels(summary, "name")
    problems = traced_problems(summary)
    problems += [f"  {name}: expected {count}, gpuflow {got.get(name, 0)}"
                 for name, count in expected.items() if got.get(name, 0) != count]
    if not expected:
        problems.append(f"  no named-counts block in {stdout_path}")
    print(f"{label}: named {expected}, gpuflow {({n: got.get(n, 0) for n in expected})}; "
          f"{sum(got.values())} kernels in {len(got)} names in all; drops {drops(summary)}; "
          f"exit {summary['exit_status']}")
    print("\n".join(problems))
    ok = not problems
    print(f"{label}_named_exact={'yes' if ok else 'no'}")
    return ok


def cmd_linear(label: str, summary_a: str, steps_a: str, summary_b: str, steps_b: str) -> bool:
    a, b = load(summary_a), load(summary_b)
    extra = int(steps_b) - int(steps_a)
    counts_a, counts_b = gpuflow_kernels(a, "name"), gpuflow_kernels(b, "name")
    problems = traced_problems(a) + traced_problems(b)
    if extra <= 0:
        problems.append(f"  the second run must have more steps ({steps_a} then {steps_b})")
    per_step = 0
    for name in sorted(set(counts_a) | set(counts_b)):
        grew = counts_b.get(name, 0) - counts_a.get(name, 0)
        if extra > 0 and (grew < 0 or grew % extra):
            problems.append(f"  {name[:100]}: {counts_a.get(name, 0)} at {steps_a} steps, "
                            f"{counts_b.get(name, 0)} at {steps_b}")
        elif extra > 0:
            per_step += grew // extra
    if per_step == 0:
        problems.append("  no kernel's count grew with the steps")
    print(f"{label}: {sum(counts_a.values())} kernels in {len(counts_a)} names at {steps_a} steps, "
          f"{sum(counts_b.values())} in {len(counts_b)} at {steps_b}: {per_step} launches a step")
    print("\n".join(problems[:40]))
    ok = not problems
    print(f"{label}_linear={'yes' if ok else 'no'}")
    return ok


def checksum_lines(path: str) -> list[str]:
    """The ``checksum`` lines, sorted: ranks of one job print theirs in no fixed order."""
    return sorted(line.strip() for line in open(path) if line.startswith("checksum "))


def cmd_same_output(label: str, bare_stdout: str, traced_stdout: str) -> bool:
    bare, traced = checksum_lines(bare_stdout), checksum_lines(traced_stdout)
    print(f"{label}: bare {bare}, under gpuflow run {traced}")
    ok = bool(bare) and bare == traced
    print(f"{label}_output_same={'yes' if ok else 'no'}")
    return ok


def main(argv: list[str]) -> int:
    commands = {"demo": cmd_demo, "patterns": cmd_patterns, "torch": cmd_torch, "tree": cmd_tree,
                "watch": cmd_watch, "named": cmd_named, "linear": cmd_linear, "profiled": cmd_profiled,
                "same_output": cmd_same_output}
    if len(argv) < 2 or argv[1] not in commands:
        print(__doc__)
        return 2
    commands[argv[1]](*argv[2:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
