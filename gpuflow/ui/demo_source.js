// The demo's source (?demo[=variant]): the scenarios and the seeded generator that stand in for an
// agent in demo mode, and the recorder it keeps of what it made (demo_recorder.js).
//
// Each variant is a scenario (GPUs, processes, traced processes and the kind of work on each of
// their streams) from which a seeded generator makes plain snapshots (schema 1, as
// Snapshot.to_json_dict() writes them) with the stream's full-then-delta semantics: a full frame,
// then deltas whose lanes carry only the spans new since the frame before. A GPU carries GPM means,
// its PCIe link and NVLinks, a traced process the devices it used (SM count, busy share, copies'
// bandwidth) and its kernels' launch configurations (demo_devices.js). Its recorder holds minutes
// of made-up readings before its start and the readings due while no frame was made, so it has no
// hole, and answers the timeline's and the sparklines' questions as an agent's recorder would, the
// PM samples of a variant whose GPUs have them among them.
//
// Constraints: no DOM and no page state: the page makes its frames with one generator, and the
// demo's worker (demo_worker.js) records the same frames with another, off the page's thread, as an
// agent's recorder runs in its own process. Time comes from the caller, so the two agree. It
// encodes nothing: the stream's compact form has one writer (the agent) and one reader (stream.js);
// the kernel order and the directions' order are stream.js's. The generator is seeded, so a
// variant looks the same on every load.

import { busyOf, gpmOf, launchOf, linksOf, modelOf, nvlinksOf, pmOf } from './demo_devices.js';
import { makeRecorder } from './demo_recorder.js';
import { GI, KI, MI } from './format.js';
import { DELTA, DIRECTIONS, FULL, PLAIN_SCHEMA, kernelOrder } from './stream.js';

// the readings the demo makes up for before its start: this long, one every PREFILL_STEP_S
const PREFILL_S = 600, PREFILL_STEP_S = 1;
// a frame made late (its thread busy or throttled) first records the readings an agent's sampler
// would have taken meanwhile, for at most this long before it (a tab hidden for longer keeps its gap)
const CATCH_UP_S = 30;

function mulberry32(a) {
  return function () {
    a |= 0; a = a + 0x6D2B79F5 | 0;
    let t = Math.imul(a ^ a >>> 15, 1 | a);
    t = t + Math.imul(t ^ t >>> 7, 61 | t) ^ t;
    return ((t ^ t >>> 14) >>> 0) / 4294967296;
  };
}
// name, mangled name, grid, block, and the registers a thread and shared memory a block it runs with
const KERNELS = {
  gemm: ['sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas',
    'sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas', [132, 1, 1], [384, 1, 1], 168, 213 * KI],
  flash: ['void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t> >(Flash_fwd_params)',
    '_Z16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_tEEEv16Flash_fwd_params', [16, 32, 8], [128, 1, 1], 255, 96 * KI],
  add: ['void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)',
    '_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIN3c108BFloat16EEESt5arrayIPcLm3EEEEviT0_T1_', [4096, 1, 1], [128, 1, 1], 28, 0],
  ln: ['void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)',
    '_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIN3c108BFloat16EfEEvifPKT_S7_S7_PT0_SA_PS5_', [8192, 1, 1], [256, 1, 1], 40, 0],
  softmax: ['void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)',
    '_ZN2at6native12_GLOBAL__N_119cunn_SoftMaxForwardILi4EfffNS1_22SoftMaxForwardEpilogueEEEvPT2_PKT0_i', [2048, 1, 1], [1024, 1, 1], 40, 0],
  adam: ['void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4> >(at::native::(anonymous namespace)::TensorListMetadata<4>, int)',
    '_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIfLi4EEEJEEEvT_T0_DpT1_', [320, 1, 1], [512, 1, 1], 64, 0],
  allreduce: ['ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)',
    '_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE', [16, 1, 1], [640, 1, 1], 96, 0],
};
const KERNEL_BY_MANGLED = new Map(Object.values(KERNELS).map(k => [k[1], k]));
const LANE_KINDS = {
  // [kernel mix, dur µs min,max, gap µs min,max, chance of an idle stretch, idle µs]
  compute: { mix: [['gemm', 0.35], ['flash', 0.2], ['add', 0.25], ['ln', 0.1], ['softmax', 0.1]], dur: [15, 700], gap: [4, 40], idleP: 0.03, idle: [800, 4000] },
  nccl: { mix: [['allreduce', 1]], dur: [600, 2600], gap: [1500, 6000], idleP: 0, idle: [0, 0] },
  copy: { copy: true, dirs: [['h2d', 0.75], ['d2h', 0.25]], bytes: [2 * MI, 48 * MI], gbps: 22, pageable: 0.2, gap: [600, 4000] },
  dflt: { mix: [['add', 0.5], ['adam', 0.5]], dur: [8, 260], gap: [300, 2500], memsetP: 0.3, idleP: 0, idle: [0, 0] },
  benchk: { mix: [['gemm', 0.4], ['flash', 0.2], ['add', 0.2], ['ln', 0.2]], dur: [200, 3200], gap: [10, 300], idleP: 0, idle: [0, 0] },
  benchc: { copy: true, dirs: [['h2d', 0.6], ['d2h', 0.3], ['d2d', 0.1]], bytes: [256 * KI, 8 * MI], gbps: 20, pageable: 0.1, gap: [300, 2500] },
};
// a pageable copy goes through a staging buffer: this much of a pinned copy's speed
const PAGEABLE_SPEED = 0.45;
// the window a traced process's GPU busy share is over, and how long after its end it is settled
const BUSY_WINDOW_US = 1e6, BUSY_SETTLE_US = 3e5;
// a GPU's UUID, the same in its device and in every attachment to it
function uuidOf(index) { return 'GPU-' + (0x5f1c3a00 + index * 0x1111).toString(16) + '-7e2b-4c1d-9a0e-00000000000' + index; }
function pick(R, mix) { let r = R(), acc = 0; for (const [k, p] of mix) { acc += p; if (r < acc) return k; } return mix[mix.length - 1][0]; }
function between(R, a, b) { return a + (b - a) * R(); }

// a GPU of the scenario: `occ` its occupancy against its SM busy share, `pcie` [rx, tx] GB/s at
// full utilization (null: the old utilization-driven rates), `pm` whether PM sampling samples it
function gpuSpec(index, model, totalGiB, limitW, base, extra) {
  return Object.assign({ index, model, totalGiB, limitW, base, phase: index * 1.7, nulls: [], lost: false, mig: 'disabled',
    smMax: model.indexOf('H') >= 0 ? 1980 : 1410, memClk: model.indexOf('H200') >= 0 ? 3201 : 1593,
    occ: 0.45 + (index % 3) * 0.1, pcie: null, pm: false }, extra || {});
}
function busOf(index) { return '00000000:' + (0x19 + index * 0x16).toString(16).toUpperCase().padStart(2, '0') + ':00.0'; }
function demoScenario(variant) {
  const H200 = 'NVIDIA H200', H100 = 'NVIDIA H100 80GB HBM3', A100 = 'NVIDIA A100-SXM4-80GB';
  const sc = { hostname: 'gpu-node-3', gpus: [], procs: [], traced: [], problems: [], interval: 250, capCount: 3000, capAgeUs: 1.0e6 };
  const att = (dev, memGiB, sm, kind) => ({ dev, memGiB, sm, kind: kind || 'compute' });
  if (variant === 'shared') {
    sc.hostname = 'lab-box-2';
    for (let i = 0; i < 8; i++) sc.gpus.push(gpuSpec(i, A100, 80, 400, i < 4 ? 88 : i < 6 ? 55 : i === 6 ? 12 : 0));
    // NVLink bridges (three of four links each) between neighbours; one link of GPU 3 down
    sc.nvlink = { pairs: [[0, 1], [2, 3], [4, 5], [6, 7]], links: 12, gbps: { 0: 96, 2: 88, 4: 14, 6: 0 }, down: [[3, 11]] };
    sc.procs.push({ pid: 48213, name: 'train_ddp', user: 'alice', cmd: 'python train_ddp.py', atts: [0, 1, 2, 3].map(d => att(d, 61.5, 90)) });
    sc.procs.push({ pid: 51877, name: 'sd_infer', user: 'bob', cmd: 'python sd_infer.py', atts: [att(4, 23.1, 58), att(5, 22.7, 52)] });
    sc.procs.push({ pid: 50120, name: 'python3', user: 'carol', cmd: 'python3', atts: [att(6, 9.4, 14)] });
    sc.procs.push({ pid: 2231, name: 'Xorg', user: 'root', cmd: '/usr/lib/xorg/Xorg', atts: [att(0, 0.05, null, 'graphics')] });
  } else if (variant === 'multigpu') {
    sc.hostname = 'dgx-h200-07';
    for (let i = 0; i < 8; i++) sc.gpus.push(gpuSpec(i, H200, 141, 700, 94, { pcie: [7 + i % 3, 2.2] }));
    sc.nvlink = 'switch';   // an HGX board: every NVLink reaches an NVSwitch, none a peer GPU
    for (let r = 0; r < 8; r++) sc.procs.push({ pid: 73100 + r, name: 'pt_main_thread', user: 'mlops', cmd: 'torchrun --nproc-per-node 8 pretrain.py', atts: [att(r, 112 + r * 0.3, 93)] });
    sc.procs.push({ pid: 73020, name: 'vllm', user: 'svc-infer', cmd: 'vllm serve', atts: [4, 5, 6, 7].map(d => att(d, 18.2, 21)) });
    sc.procs.push({ pid: 70011, name: 'nccl-tests', user: 'ops', cmd: 'all_reduce_perf', atts: [0, 1, 2, 3, 4, 5, 6, 7].map(d => att(d, 1.1, null)) });
    sc.procs.push({ pid: 74410, name: 'eval_job', user: 'dana', cmd: 'python eval.py', atts: [att(2, 6.3, 11), att(3, 6.3, 10)], period: [24, 14] });
    sc.procs.push({ pid: 74433, name: 'tb_profile', user: 'dana', cmd: 'python profile.py', atts: [att(1, 2.2, 3)], period: [18, 9, 6] });
    sc.procs.push({ pid: 1804, name: 'dcgm-hostengine', user: 'root', cmd: 'nv-hostengine', atts: [att(0, 0.3, 0)] });
  } else if (variant === 'traced' || variant === 'bench') {
    if (variant === 'traced') {
      sc.hostname = 'gpu-node-3'; sc.interval = 100;
      sc.gpus.push(gpuSpec(0, H100, 80, 700, 91, { pcie: [21, 4.5] }), gpuSpec(1, H100, 80, 700, 84, { pcie: [9, 2.5] }));
      sc.procs.push({ pid: 31337, name: 'train_step', user: 'alice', cmd: 'gpuflow run -- python train_step.py', atts: [att(0, 38.5, 88), att(1, 37.9, 81)] });
      sc.procs.push({ pid: 31455, name: 'legacy_infer', user: 'alice', cmd: 'gpuflow run -- ./legacy_infer', atts: [att(1, 4.1, 6)] });
      sc.traced.push({ pid: 31337, name: 'train_step', session: '9f2c4e1a7b3d5c60', status: 'ok',
        lanes: [[0, 0, 'default', 'dflt'], [0, 13, 'compute', 'compute'], [0, 14, 'h2d_prefetch', 'copy'], [0, 15, 'nccl', 'nccl'],
          [1, 0, 'default', 'dflt'], [1, 21, 'compute', 'compute'], [1, 22, '22', 'copy'], [1, 23, 'nccl', 'nccl']] });
      sc.traced.push({ pid: 31402, name: 'warmup_copy', session: '9f2c4e1a7b3d5c60', status: 'ok', exited: 0, lanes: [[0, 0, 'default', 'copy']], preRunUs: 2.5e6 });
      sc.traced.push({ pid: 31455, name: 'legacy_infer', session: '9f2c4e1a7b3d5c60', status: 'cupti_in_use',
        detail: 'another tool holds the CUPTI subscriber (e.g. Nsight Systems); NVML data is still shown', lanes: [] });
    } else {
      sc.hostname = 'bench-node'; sc.interval = 50; sc.capCount = 2000; sc.capAgeUs = 30e6;
      const R = mulberry32(99);
      for (let i = 0; i < 8; i++) sc.gpus.push(gpuSpec(i, H200, 141, 700, 70 + 25 * R()));
      sc.nvlink = 'switch';
      const lanes = [];
      for (let d = 0; d < 8; d++) { lanes.push([d, 13 + d * 2, 'compute', 'benchk']); lanes.push([d, 14 + d * 2, d % 2 ? 'copy' : 'nccl', d % 2 ? 'benchc' : 'benchk']); }
      sc.procs.push({ pid: 40000, name: 'bench_traced', user: 'bench', cmd: 'gpuflow run -- python bench.py', atts: [0, 1, 2, 3, 4, 5, 6, 7].map(d => att(d, 20, 80)) });
      sc.traced.push({ pid: 40000, name: 'bench_traced', session: 'benchbenchbench0', status: 'ok', lanes, prefill: true });
      for (let i = 1; i < 64; i++) {
        const n = 1 + Math.floor(R() * R() * 4), first = Math.floor(R() * 8), atts = [];
        for (let j = 0; j < n; j++) atts.push(att((first + j) % 8, 0.5 + R() * 10, R() < 0.1 ? null : Math.round(R() * 60)));
        sc.procs.push({ pid: 40000 + i * 7, name: ['python', 'worker', 'infer', 'pt_main_thread', 'jupyter'][i % 5] + '_' + i, user: 'user' + (i % 9), cmd: 'python job.py', atts });
      }
    }
  } else {   // the default tour: a busy card, a card with unsupported fields, an idle one, a lost one
    sc.hostname = 'workstation'; sc.interval = 100;
    sc.gpus.push(gpuSpec(0, H100, 80, 700, 86, { pcie: [14, 3.5], pm: true }));
    sc.gpus.push(gpuSpec(1, 'GRID A100D-40C', 40, 250, 35, { nulls: ['temperature_c', 'power_draw_w', 'power_limit_w', 'clock_mem_mhz', 'pcie_tx_bytes_per_s', 'pcie_rx_bytes_per_s'], mig: null }));
    sc.gpus.push(gpuSpec(2, 'NVIDIA L4', 24, 72, 0, { pm: true }));
    sc.gpus.push(gpuSpec(3, 'NVIDIA L4', 24, 72, 0, { lost: true }));
    sc.procs.push({ pid: 31337, name: 'train_step', user: 'alice', cmd: 'gpuflow run -- python train_step.py', atts: [att(0, 38.5, 86)] });
    sc.procs.push({ pid: 20417, name: 'jupyter-kernel', user: 'bob', cmd: 'python -m ipykernel', atts: [att(1, 11.8, null)] });
    sc.procs.push({ pid: 20988, name: 'ollama', user: 'bob', cmd: 'ollama serve', atts: [att(1, 6.2, null), att(2, 5.9, 0)] });
    sc.traced.push({ pid: 31337, name: 'train_step', session: '9f2c4e1a7b3d5c60', status: 'ok',
      lanes: [[0, 0, 'default', 'dflt'], [0, 13, 'compute', 'compute'], [0, 14, 'h2d_prefetch', 'copy'], [0, 15, '15', 'compute']] });
    sc.problems.push({ source: 'nvml', severity: 'error', message: 'GPU 3 (00000000:C1:00.0) stopped answering: GPU is lost' });
    sc.problems.push({ source: 'nvml', severity: 'info', message: 'GPU 1 is a vGPU: temperature, power and some clocks are not reported' });
    // GPU metrics (--gpu-metrics): PM sampling on GPU 0 and 2; the vGPU refuses it
    sc.pmsampling = true;
    sc.problems.push({ source: 'pmsampling', severity: 'info', message: 'GPU 0 (NVIDIA H100 80GB HBM3): PM sampling every 100 ms, 9 of 9 metrics (synthetic)' });
    sc.problems.push({ source: 'pmsampling', severity: 'warning', message: 'GPU 1 (GRID A100D-40C): no GPU metrics (unsupported): PM sampling is not supported on a vGPU' });
    sc.problems.push({ source: 'pmsampling', severity: 'info', message: 'GPU 2 (NVIDIA L4): PM sampling every 100 ms, 9 of 9 metrics (synthetic)' });
  }
  return sc;
}

// The variant's generator: frame(now) is the plain frame at `now` (ms since the epoch; every
// `interval` ms), rec its recorder (null with record: false). Two generators of one variant made
// with the same start and asked for frames at the same times make the same frames: the page shows
// one's and the demo's worker records the other's (demo.js).
export function makeDemo(variant, { start = Date.now(), record = true } = {}) {
  const sc = demoScenario(variant);
  const R = mulberry32(variant === 'bench' ? 7 : 42);
  const rec = record ? makeRecorder(variant === 'bench' ? 30 : 60) : null;
  let seq = 1000, sentSeq = null;
  // per traced process: its kernels and transfers, each kernel's time per device, its copies per
  // device, direction and kind of host memory, and its busy share per device (settled each window)
  const traced = sc.traced.map(t => ({
    spec: t, rec: 0, kernels: new Map(), transfers: new Map(), kernelDev: new Map(), copies: new Map(), busy: new Map(), busyEnd: 0,
    lanes: t.lanes.map(([device, stream, label, kind]) => ({ device, context: 1, stream, label, kind: LANE_KINDS[kind],
      executions: 0, sample: [], pending: [], cursor: 0 })),
  }));
  const nowUs0 = start * 1000;
  for (const t of traced) {
    const back = t.spec.preRunUs || (t.spec.prefill ? 12e6 : 6e6);
    for (const L of t.lanes) { L.cursor = nowUs0 - back + R() * 2000; }
    if (t.spec.exited !== undefined) { for (const L of t.lanes) generate(t, L, nowUs0 - 1.2e6); t.exitedAt = nowUs0 - 1.2e6; }
    else for (const L of t.lanes) generate(t, L, nowUs0 - 60000);
    for (const L of t.lanes) L.pending = [];
  }
  function generate(t, L, untilUs) {
    const K = L.kind;
    while (L.cursor < untilUs) {
      // every span has the one shape decoded spans have: the drawing's hot loop stays monomorphic
      let s, mangled = null;
      if (K.copy) {
        const dir = pick(R, K.dirs), bytes = Math.round(between(R, K.bytes[0], K.bytes[1]) / 4096) * 4096;
        const memory = dir === 'h2d' || dir === 'd2h' ? (R() < K.pageable ? 'pageable' : 'pinned') : 'other';
        const dur = Math.round(bytes / (K.gbps * (memory === 'pageable' ? PAGEABLE_SPEED : 1) * 1e9) * 1e9 * between(R, 0.9, 1.2));
        s = { seq: 0, kind: 'memcpy', start_us: Math.round(L.cursor), dur_ns: dur, name: null, grid: null, block: null, bytes, direction: dir };
        L.cursor += dur / 1000 + between(R, K.gap[0], K.gap[1]);
        const key = L.device + '|' + dir + '|' + memory;
        let c = t.copies.get(key);
        if (!c) { c = { device: L.device, direction: dir, memory, count: 0, bytes: 0, total_ns: 0 }; t.copies.set(key, c); }
        c.count++; c.bytes += bytes; c.total_ns += dur;
      } else if (K.memsetP && R() < K.memsetP) {
        const bytes = Math.round(between(R, 1, 8)) * MI, dur = Math.round(between(R, 8000, 50000));
        s = { seq: 0, kind: 'memset', start_us: Math.round(L.cursor), dur_ns: dur, name: null, grid: null, block: null, bytes, direction: 'memset' };
        L.cursor += dur / 1000 + between(R, K.gap[0], K.gap[1]);
      } else {
        const kn = KERNELS[pick(R, K.mix)], dur = Math.round(between(R, K.dur[0], K.dur[1]) * 1000);
        s = { seq: 0, kind: 'kernel', start_us: Math.round(L.cursor), dur_ns: dur, name: kn[0], grid: kn[2], block: kn[3], bytes: null, direction: null };
        mangled = kn[1];
        L.cursor += dur / 1000 + between(R, K.gap[0], K.gap[1]) + (R() < K.idleP ? between(R, K.idle[0], K.idle[1]) : 0);
      }
      s.seq = ++t.rec;
      L.executions++;
      if (rec) rec.span(t.spec, L, s);
      if (s.kind === 'kernel') {
        let a = t.kernels.get(s.name);
        if (!a) { a = { name: s.name, mangled, count: 0, total_ns: 0, min_ns: Infinity, max_ns: 0 }; t.kernels.set(s.name, a); }
        a.count++; a.total_ns += s.dur_ns; if (s.dur_ns < a.min_ns) a.min_ns = s.dur_ns; if (s.dur_ns > a.max_ns) a.max_ns = s.dur_ns;
        let byDev = t.kernelDev.get(mangled);
        if (!byDev) { byDev = new Map(); t.kernelDev.set(mangled, byDev); }
        byDev.set(L.device, (byDev.get(L.device) || 0) + s.dur_ns);
      } else {
        let a = t.transfers.get(s.direction);
        if (!a) { a = { direction: s.direction, count: 0, bytes: 0, total_ns: 0 }; t.transfers.set(s.direction, a); }
        a.count++; a.bytes += s.bytes; a.total_ns += s.dur_ns;
      }
      L.sample.push(s); L.pending.push(s);
    }
    const minStart = untilUs - sc.capAgeUs;
    let cut = 0;
    while (cut < L.sample.length && L.sample[cut].start_us < minStart) cut++;
    cut = Math.max(cut, L.sample.length - sc.capCount);
    if (cut > 0) L.sample.splice(0, cut);
  }
  function gpu(g, tS, R) {
    const nul = (k, v) => (g.lost || g.nulls.indexOf(k) >= 0 ? null : v);
    const util = g.base > 0 ? Math.max(0, Math.min(100, Math.round(load(g, tS) + (R() - 0.5) * 4))) : 0;
    let used = 0.45;
    for (const p of sc.procs) if (alive(p, tS)) for (const a of p.atts) if (a.dev === g.index) used += a.memGiB;
    const temp = Math.round(31 + util * 0.42 + Math.sin(tS * 0.1 + g.phase) * 1.5);
    const power = Math.round((g.limitW * 0.09 + util / 100 * g.limitW * 0.78) * 10) / 10;
    const jitter = 0.85 + R() * 0.3;
    const txb = g.pcie ? Math.round(util / 100 * g.pcie[1] * 1e9 * jitter) : util > 0 ? Math.round((0.3 + util / 100 * 2 + R() * 0.4) * 1e9) : 120000;
    const rxb = g.pcie ? Math.round(util / 100 * g.pcie[0] * 1e9 * (2 - jitter)) : Math.round(txb * 0.6);
    const nvlinks = nvlinksOf(sc, g, tS, busOf);
    let nvTx = null, nvRx = null;
    for (const l of nvlinks) { nvTx = (nvTx || 0) + l.tx_bytes_per_s; nvRx = (nvRx || 0) + l.rx_bytes_per_s; }
    return {
      index: g.index, uuid: uuidOf(g.index),
      name: g.lost ? null : g.model, pci_bus_id: busOf(g.index),
      lost: g.lost, utilization_gpu_pct: nul('utilization_gpu_pct', util), utilization_memory_pct: nul('utilization_memory_pct', Math.round(util * 0.45)),
      memory_used_bytes: nul('memory_used_bytes', Math.round(Math.min(used, g.totalGiB * 0.98) * GI)), memory_total_bytes: nul('memory_total_bytes', g.totalGiB * GI),
      temperature_c: nul('temperature_c', temp), power_draw_w: nul('power_draw_w', power), power_limit_w: nul('power_limit_w', g.limitW),
      clock_sm_mhz: nul('clock_sm_mhz', util > 2 ? g.smMax - Math.round(R() * 3) * 15 : 345), clock_mem_mhz: nul('clock_mem_mhz', g.memClk),
      pcie_tx_bytes_per_s: nul('pcie_tx_bytes_per_s', txb), pcie_rx_bytes_per_s: nul('pcie_rx_bytes_per_s', rxb),
      mig_mode: g.lost ? null : g.mig,
      gpm: gpmOf(g, util, nvTx, nvRx, txb, rxb), gpm_instances: [], links: linksOf(g, util, nvlinks),
    };
  }
  // a card's utilization at tS but for its noise
  function load(g, tS) { return g.base + Math.sin(tS * 0.35 + g.phase) * 5 + Math.sin(tS * 1.7 + g.phase * 3) * 2 + slump(g, tS); }
  // now and then a card's work stalls for a while (a data-loader wait): the past has something to find
  function slump(g, tS) {
    const ph = ((tS + g.index * 37) % 150 + 150) % 150;
    return g.base > 0 && ph < 12 ? -g.base * 0.8 * Math.sin(ph / 12 * Math.PI) : 0;
  }
  function alive(p, tS) {
    if (!p.period) return true;
    const [per, on, off] = p.period;   // present during [off||0, on) of every `per` seconds
    const ph = (tS + (off || 0)) % per;
    return ph < on;
  }
  function frame(nowMs = Date.now()) {
    const nowUs = nowMs * 1000, tS = (nowMs - start) / 1000;
    const lag = 45000 + R() * 50000;
    for (const t of traced) if (t.spec.status === 'ok' && t.spec.exited === undefined) for (const L of t.lanes) generate(t, L, nowUs - lag);
    const isFull = sentSeq === null;
    seq++;
    const f = {
      frame: isFull ? FULL : DELTA, base_seq: isFull ? null : sentSeq, schema: PLAIN_SCHEMA, seq, timestamp: nowMs / 1000,
      host: { hostname: sc.hostname, driver_version: '580.159.04', nvml_version: '13.580.159.04', cuda_driver_version: '13.0', problems: sc.problems },
      sources: (traced.length ? ['cupti', 'nvml'] : ['nvml']).concat(sc.pmsampling ? ['pmsampling'] : []),
      devices: sc.gpus.map(g => gpu(g, tS, R)),
      processes: processesAt(tS, R),
      traced: traced.map(t => tracedJson(t, isFull, nowUs)).sort((a, b) => a.pid - b.pid),
    };
    sentSeq = seq;
    if (rec) {
      catchUp(nowMs / 1000);
      rec.reading(nowMs / 1000, f, sc.interval / 1000, pmAt(tS));
      lastReadingS = nowMs / 1000;
    }
    return f;
  }
  // the PM samples of the GPUs that have them at tS: [[uuid, {metric: value}]]
  function pmAt(tS) {
    const out = [];
    for (const g of sc.gpus) { const v = pmOf(g, tS, g.base > 0 ? load(g, tS) : 0); if (v) out.push([uuidOf(g.index), v]); }
    return out;
  }
  // The readings due since the last one recorded, one every interval, made up with a generator of
  // their own (the frames stay the same however late they come): the agent's sampler runs on
  // whatever the page is busy with, so its recorder has no hole where no frame was made. Without
  // them, when the demo ran on the page's thread, the first frame came the page's setup after the
  // made-up minutes' last reading (2 s on an idle machine, 3.5 s with the CPU slowed 4x), past the
  // 2.5 s it stands for, and a page busy for over 0.6 s left a hole too: every moment in one showed
  // no reading and no process. Its own thread can still be late (throttled, or a loaded machine).
  function catchUp(nowS) {
    const step = sc.interval / 1000;
    for (let t = Math.max(lastReadingS + step, nowS - CATCH_UP_S); t < nowS - step / 2; t += step) {
      const tS = t - start / 1000;
      rec.reading(t, { devices: sc.gpus.map(g => gpu(g, tS, R3)), processes: processesAt(tS, R3) }, step, pmAt(tS));
    }
  }
  function processesAt(tS, R) {
    return sc.procs.filter(p => alive(p, tS)).map(p => ({
      pid: p.pid, name: p.name, user: p.user, cmdline: p.cmd,
      attachments: p.atts.slice().sort((a, b) => a.dev - b.dev).map(a => ({
        device_index: a.dev, device_uuid: uuidOf(a.dev), kind: a.kind,
        memory_used_bytes: Math.round(a.memGiB * GI * (1 + (R() - 0.5) * 0.002)),
        sm_util_pct: a.sm === null ? null : Math.max(0, Math.min(100, Math.round(a.sm + (R() - 0.5) * 8 + Math.sin(tS * 0.4 + a.dev) * 4))),
        mem_util_pct: a.sm === null ? null : Math.round(a.sm * 0.4),
      })),
    })).sort((a, b) => a.pid - b.pid);
  }
  // the minutes before the demo's start, made up with a generator of their own (the demo's own
  // frames stay the same whatever is made up here)
  const R2 = mulberry32(5), R3 = mulberry32(11);
  let lastReadingS = start / 1000;
  for (let tS = -PREFILL_S; rec && tS < 0; tS += PREFILL_STEP_S) {
    rec.reading(start / 1000 + tS, { devices: sc.gpus.map(g => gpu(g, tS, R2)), processes: processesAt(tS, R2) }, PREFILL_STEP_S, pmAt(tS));
    lastReadingS = start / 1000 + tS;
  }
  // a traced process as Snapshot.to_json_dict() writes it; a delta's lanes hold only new spans
  function tracedJson(t, isFull, nowUs) {
    const sp = t.spec;
    let w0 = Infinity, w1 = -Infinity;
    const ks = [...t.kernels.values()].map(k => ({ name: k.name, mangled: k.mangled, count: k.count, total_ns: k.total_ns,
      min_ns: k.min_ns, max_ns: k.max_ns, timed: k.count })).sort(kernelOrder);
    const lanes = t.lanes.map(L => {
      const spans = isFull ? L.sample : L.pending;
      L.pending = [];
      if (L.sample.length) {
        w0 = Math.min(w0, L.sample[0].start_us);
        const last = L.sample[L.sample.length - 1];
        w1 = Math.max(w1, last.start_us + Math.round(last.dur_ns / 1000));
      }
      const lane = { device: L.device, context: L.context, stream: L.stream, label: L.label, executions: L.executions,
        spans_elided: L.executions - L.sample.length, spans };
      if (!isFull) lane.spans_skipped = 0;   // the demo sends every new span
      return lane;
    });
    const ts = [...t.transfers.values()].sort((a, b) => DIRECTIONS.indexOf(a.direction) - DIRECTIONS.indexOf(b.direction)).map(x => Object.assign({}, x));
    const exited = sp.exited !== undefined;
    if (!exited) settleBusy(t, nowUs);
    return {
      pid: sp.pid, session: sp.session, name: sp.name, state: exited ? 'exited' : 'running', exit_status: exited ? sp.exited : null,
      truncated: false, cupti_status: sp.status, cupti_detail: sp.detail || null, records: t.rec,
      dropped_ring: 0, dropped_cupti: 0, window_start_us: w0 === Infinity ? null : w0, window_end_us: w1 === -Infinity ? null : w1,
      behind_live_ms: w1 === -Infinity ? null : Math.round((nowUs - w1) / 100) / 10,
      complete: true, kernels: ks, transfers: ts, lanes, devices: devicesOf(t), kernel_launches: launchesOf(t),
    };
  }
  // each device's busy share over the last window that has settled (its spans all in)
  function settleBusy(t, nowUs) {
    const end = Math.floor((nowUs - BUSY_SETTLE_US) / BUSY_WINDOW_US) * BUSY_WINDOW_US;
    if (end <= t.busyEnd) return;
    t.busyEnd = end;
    for (const device of new Set(t.lanes.map(L => L.device))) {
      const pct = busyOf(t.lanes.filter(L => L.device === device), end, BUSY_WINDOW_US), b = t.busy.get(device);
      t.busy.set(device, { pct, ns: (b ? b.ns : 0) + Math.round(pct / 100 * BUSY_WINDOW_US * 1000) });
    }
  }
  // the devices a traced process used (TracedDevice in docs/snapshot.md), as its DEVICE records and
  // its own kernels and copies describe them; the demo process sees every GPU in NVML's order
  function devicesOf(t) {
    return [...new Set(t.lanes.map(L => L.device))].sort((a, b) => a - b).map(device => {
      const g = sc.gpus.find(x => x.index === device), m = g ? modelOf(g.model) : null, b = t.busy.get(device);
      const copies = [...t.copies.values()].filter(c => c.device === device)
        .sort((a, b) => DIRECTIONS.indexOf(a.direction) - DIRECTIONS.indexOf(b.direction) || (a.memory < b.memory ? -1 : 1))
        .map(c => ({ direction: c.direction, memory: c.memory, count: c.count, bytes: c.bytes, total_ns: c.total_ns,
          bytes_per_s: c.total_ns > 0 ? c.bytes / (c.total_ns / 1e9) : null }));
      return { device, uuid: uuidOf(device), name: g ? g.model : null, compute_capability: m ? m.cc : null, sm_count: m ? m.sms : null,
        busy_pct: b ? b.pct : null, busy_window_ms: b ? BUSY_WINDOW_US / 1000 : null, busy_window_end_us: b ? t.busyEnd : null,
        busy_ns: b ? b.ns : 0, kernel_span_ns: null, busy_late: 0, copies };
    });
  }
  // a launch entry per kernel it ran, on the device it spent the most time on, in mangled order
  function launchesOf(t) {
    const out = [];
    for (const [mangled, byDev] of t.kernelDev) {
      const kn = KERNEL_BY_MANGLED.get(mangled);
      let device = null, most = -1;
      for (const [d, ns] of byDev) if (ns > most) { device = d; most = ns; }
      const g = sc.gpus.find(x => x.index === device), m = g ? modelOf(g.model) : null;
      if (kn && m) out.push(launchOf(mangled, { grid: kn[2], block: kn[3], regs: kn[4], smem: kn[5] }, m, device));
    }
    return out.sort((a, b) => (a.mangled < b.mangled ? -1 : a.mangled > b.mangled ? 1 : 0));
  }
  return { interval: sc.interval, frame, rec, start };
}

