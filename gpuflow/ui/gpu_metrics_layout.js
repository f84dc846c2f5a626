// GPU-metric rows' place in a traced strip (issue 21; docs/gpu-metrics.md, "PM sampling"): how tall the
// rows above a traced process's lanes are, and which GPU each of its lanes' devices is.
//
// The rows exist only when the agent samples GPU metrics (its sources include 'pmsampling', the
// --gpu-metrics collector); then each device the process's lanes use gets ROWS rows of ROW_H
// world units above the lanes, whether its samples have come yet or not, so the strip's height
// follows the snapshot alone (the layout stays put while samples arrive). A lane's device is a
// CUDA ordinal inside the traced process; its GPU (the samples are per GPU UUID) is, in this
// order: the process's own NVML attachments when it holds as many GPUs as its lanes use (matched
// in index order), else the GPU of the same index. That is exact where the process sees every GPU
// in NVML's order, and a guess otherwise: the row's label then says "GPU ?".
//
// Constraints: pure functions of the shown snapshot and the node's data (memoised on the
// traced object, which store.js makes anew when its lanes change); imports only store.js.

import { shownSnap } from './store.js';

export const ROW_H = 14, ROWS = 3;
export const SOURCE = 'pmsampling';

export function gpuMetricsOn() {
  const f = shownSnap();
  return !!(f && (f.sources || []).includes(SOURCE));
}
// [{device, uuid|null}] for the distinct devices of a traced strip's lanes, in device order
export function laneGpus(p, tr) {
  if (tr.pmGpus) return tr.pmGpus;
  const devices = [...new Set(tr.lanes.map(l => l.device))].sort((a, b) => a - b);
  const att = p && p.attachments ? [...p.attachments].sort((a, b) => a.device_index - b.device_index) : [];
  const f = shownSnap(), byIndex = new Map(((f && f.devices) || []).map(d => [d.index, d.uuid]));
  tr.pmGpus = devices.map((device, i) => ({
    device, uuid: att.length === devices.length ? att[i].device_uuid : byIndex.get(device) || null }));
  return tr.pmGpus;
}
// world units the rows take above the lanes of a traced strip (0 when GPU metrics are off)
export function gpuRowsHeight(p, tr) {
  if (!tr || !tr.lanes.length || !gpuMetricsOn()) return 0;
  return laneGpus(p, tr).length * ROWS * ROW_H + 4;
}
