#!/usr/bin/env bash
# gpu_smoke.sh — producer-side checks of libgpuflow_inject.so on a machine with an NVIDIA GPU.
#
# Builds the injection library (the package's flags) and examples/demo_workload.cu, runs the
# demo bare and injected, compares the ring with the demo's own counts (gpu_compare.py), checks
# a tiny ring drops and counts, a fork child stays out, PyTorch is traced (gpu_torch_probe.py),
# and runs tests/inject. Rings are taken by tests/support/ringcatch.py (the agent's side of the
# handover, standing in for it) and written under $OUT/rings-<tag>/. Writes logs to $OUT (default
# /tmp/gpuflow-smoke). Run from the repo root, with GPUFlow installed (`pip install -e .`: the ring
# reader takes the header's layout from it).
set -u
export PYTHONPATH="$PWD/tests/support${PYTHONPATH:+:$PYTHONPATH}"   # ringread.py, for the scripts below
OUT=${OUT:-/tmp/gpuflow-smoke}
mkdir -p "$OUT"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUPTI=${GPUFLOW_CUPTI_PATH:-$(ls "$CUDA_HOME"/targets/*/lib/libcupti.so.1? "$CUDA_HOME"/extras/CUPTI/lib64/libcupti.so.1? 2>/dev/null | head -1)}
B=$(mktemp -d)
echo "== machine"; nvidia-smi -L; echo "cupti: $CUPTI"; nvcc --version | tail -1

echo "== build"
gcc -std=c11 -O2 -fPIC -fvisibility=hidden -pthread -Wall -Wextra \
    -Werror=implicit-function-declaration -Icupti_src -I"$CUDA_HOME/include" -shared \
    -o "$B/libgpuflow_inject.so" cupti_src/gpuflow_inject.c cupti_src/activity.c \
    cupti_src/flusher.c cupti_src/cupti_loader.c cupti_src/buffer_pool.c cupti_src/ring_producer.c \
    cupti_src/ring_handover.c \
    -Wl,--version-script=cupti_src/exports.map -ldl -lrt -pthread -Wl,--as-needed -Wl,-z,defs || exit 1
nvcc -O2 -lineinfo -o "$B/demo_workload" examples/demo_workload.cu || exit 1
printf '#include <nvtx3/nvToolsExtCudaRt.h>\nextern "C" void name_stream(void *s, const char *n)\n{ nvtxNameCudaStreamA((cudaStream_t)s, n); }\n' > "$B/namer.cpp"
g++ -shared -fPIC -I"$CUDA_HOME/include" -o "$B/libnamer.so" "$B/namer.cpp" -ldl || exit 1

inject() { # inject <tag> <cmd...>: run it injected; its rings land in $OUT/rings-<tag>/
    local s=$1; shift
    rm -rf "$OUT/rings-$s"
    env CUDA_INJECTION64_PATH="$B/libgpuflow_inject.so" GPUFLOW_CUPTI_PATH="$CUPTI" \
        NVTX_INJECTION64_PATH="$CUPTI" python3 tests/support/ringcatch.py "$OUT/rings-$s" -- "$@"
}
ring_of() { ls "$OUT/rings-$1"/ring-*.bin 2>/dev/null | head -1; }
TIMEFORMAT=%R

echo "== demo: bare vs injected (counts)"
"$B/demo_workload" 200 > "$OUT/bare.txt" || echo "bare demo failed"
inject s1 "$B/demo_workload" 200 > "$OUT/injected.txt" || echo "injected demo failed rc=$?"
python3 tests/inject/gpu_compare.py "$OUT/injected.txt" "$(ring_of s1)" > "$OUT/compare.json"
tail -1 "$OUT/compare.json"; grep -A12 '"checks"' "$OUT/compare.json"

echo "== demo wall time, 3000 iterations: bare, injected (x2 each)"
for i in 1 2; do
  { time "$B/demo_workload" 3000 > /dev/null; } 2>&1 | sed 's/^/bare /'
  { time inject "t$i" "$B/demo_workload" 3000 > /dev/null; } 2>&1 | sed 's/^/injected /'
done
python3 tests/support/ringread.py "$(ring_of t1)" | grep -E '"(status|status_detail|dropped_ring|dropped_cupti|head|incomplete)"'

echo "== tiny ring: drops are counted, the program is untouched"
GPUFLOW_RING_CAPACITY=1024 inject s2 "$B/demo_workload" 200 > /dev/null; echo "rc=$?"
python3 tests/support/ringread.py "$(ring_of s2)" | grep -E '"(status|dropped_ring|head|records)"'

echo "== fork child (python + torch)"
inject s3 python3 -c "
import os, torch
x = torch.ones(1000, device='cuda'); torch.cuda.synchronize()
pid = os.fork()
if pid == 0:
    import sys; sys.exit(0)  # a normal exit: atexit handlers run in the child
os.waitpid(pid, 0); print('child', pid)
" ; ls "$OUT/rings-s3" ; python3 tests/support/ringread.py "$(ring_of s3)" | grep -E '"(status|status_detail|producer_exited|kernels)"' -A3 | head -20

echo "== a process tree: bash -c with two demos -> two rings; no ring socket -> inert"
inject s5 bash -c "'$B/demo_workload' 5 > /dev/null & '$B/demo_workload' 7 > /dev/null; wait"; echo "rc=$?"
for r in "$OUT/rings-s5"/ring-*.bin; do
  python3 tests/support/ringread.py "$r" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['ring'], d['header']['status'], d['header']['producer_exited'], sum(d['kernels'].values()))"
done
env -u GPUFLOW_RING_SOCKET CUDA_INJECTION64_PATH="$B/libgpuflow_inject.so" "$B/demo_workload" 3 2> "$OUT/inert.err" | tail -1
echo "without a ring socket: rc=$? stderr lines=$(wc -l < "$OUT/inert.err")"
GPUFLOW_RING_SOCKET=/nonexistent/ring.sock CUDA_INJECTION64_PATH="$B/libgpuflow_inject.so" "$B/demo_workload" 3 2>&1 | grep -E "gpuflow|counts" | head -3

echo "== torch probe (latency, torch.profiler)"
GPUFLOW_TEST_NAMER="$B/libnamer.so" inject s4 timeout 120 python3 tests/inject/gpu_torch_probe.py 2>&1 | tail -8; echo "rc=$?"
python3 tests/support/ringread.py "$(ring_of s4)" > "$OUT/torch_ring.json"; grep -E '"(status|status_detail|dropped_ring|dropped_cupti|producer_exited)"' "$OUT/torch_ring.json"; grep -A6 '"streams"' "$OUT/torch_ring.json"

echo "== pytest tests/inject"
python3 -m pytest tests/inject -q -p no:cacheprovider 2>&1 | tail -5
