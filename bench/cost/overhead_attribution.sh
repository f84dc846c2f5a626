#!/usr/bin/env bash
# bench/cost/overhead_attribution.sh — where does `gpuflow run`'s cost above the CUPTI floor
# come from?
#
# Times one workload (a command printing METRIC=<value>) under variants that add one piece of
# GPUFlow at a time, interleaved round by round, and prints medians:
#   bare | floor (bench/cost/cupti_floor.c) | floor-nvtx (NVTX_INJECTION64_PATH set) |
#   floor-clock (the floor with GPUFlow's CLOCK_MONOTONIC timestamp callback) | floor-sub (the
#   floor with GPUFlow's CUPTI subscriber) | inject (libgpuflow_inject.so alone, its ring taken by
#   tests/support/ringcatch.py, which never drains it: the ring fills and drops) |
#   inject-nonvtx | run (gpuflow run) | run-nonvml (NVML off)
# VARIANTS="bare floor floor-clock run" picks some (default: all, in that order).
# Usage: bench/cost/overhead_attribution.sh FLOOR_LIB METRIC ROUNDS -- CMD ARGS...
set -uo pipefail
FLOOR=$1; METRIC=$2; ROUNDS=$3; shift 4
PY=${PYTHON:-python3}
INJECT=$($PY -c "from gpuflow.collectors.cupti.injection import inject_library_path as p; print(p())")
CUPTI=$($PY -c "from gpuflow.collectors.cupti.injection import cupti_library_candidates as c; print(c()[0])")
VARIANTS=${VARIANTS:-"bare floor floor-nvtx floor-clock floor-sub inject inject-nonvtx run run-nonvml"}
for v in $VARIANTS; do   # refuse a typo before spending device time
  case $v in bare|floor|floor-nvtx|floor-clock|floor-sub|inject|inject-nonvtx|run|run-nonvml) ;;
    *) echo "unknown variant $v" >&2; exit 2 ;; esac
done
declare -A RES
RINGS=$(mktemp -d)/rings   # where ringcatch.py leaves the rings it took (removed after each run)
one() {
  local v=$1; shift
  local out
  case $v in
    bare) out=$("$@") ;;
    floor) out=$(CUDA_INJECTION64_PATH=$FLOOR "$@") ;;
    floor-nvtx) out=$(CUDA_INJECTION64_PATH=$FLOOR NVTX_INJECTION64_PATH=$CUPTI "$@") ;;
    floor-clock) out=$(CUDA_INJECTION64_PATH=$FLOOR FLOOR_CLOCK=1 "$@") ;;
    floor-sub) out=$(CUDA_INJECTION64_PATH=$FLOOR FLOOR_SUBSCRIBE=1 "$@") ;;
    inject) out=$(CUDA_INJECTION64_PATH=$INJECT GPUFLOW_CUPTI_PATH=$CUPTI NVTX_INJECTION64_PATH=$CUPTI GPUFLOW_RING_CAPACITY=65536 $PY tests/support/ringcatch.py "$RINGS" -- "$@" 2>/dev/null) ;;
    inject-nonvtx) out=$(CUDA_INJECTION64_PATH=$INJECT GPUFLOW_CUPTI_PATH=$CUPTI GPUFLOW_RING_CAPACITY=65536 $PY tests/support/ringcatch.py "$RINGS" -- "$@" 2>/dev/null) ;;
    run) out=$($PY -m gpuflow run --port 0 --no-summary -- "$@" 2>/dev/null) ;;
    run-nonvml) out=$(GPUFLOW_DISABLED_PLUGINS=nvml $PY -m gpuflow run --port 0 --no-summary -- "$@" 2>/dev/null) ;;
  esac
  rm -rf "$RINGS"
  echo "$out" | grep -o "$METRIC=[0-9.eE+-]*" | cut -d= -f2
}
for r in $(seq "$ROUNDS"); do
  for v in $VARIANTS; do RES[$v]+="$(one "$v" "$@") "; done
done
for v in $VARIANTS; do
  echo "$v ${RES[$v]}" | $PY -c "
import sys, statistics
name, *vals = sys.stdin.read().split(); vals = [float(x) for x in vals]
print(f'{name:<14} median={statistics.median(vals):.4f} runs=' + ' '.join(f'{x:.4f}' for x in vals))"
done
