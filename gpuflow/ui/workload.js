// Who a process belongs to, in words: its Kubernetes pod, container or Slurm job (the snapshot's
// Process.workload, docs/snapshot.md "Workload"). One short label for the process node's title
// and the process list, and the hover's rows. A process on a GPU its container was not allocated
// (gpus_unallocated) is told in the warning colour wherever it shows.
//
// Constraints: pure functions of the workload object (null for a process in none); what they
// return is drawn as text (canvas text, or textContent in the list), never parsed as markup. Ids
// are shortened to 12 characters, as `docker ps` and `crictl ps` print them.

const SHORT_ID = 12;

// "ml/trainer-0", "pod 0f8f4f3c-6a4e", "docker e5f6d3d3d3d3", "job 81234", or '' for none
export function workloadLabel(w) {
  if (!w) return '';
  if (w.pod_name) return (w.pod_namespace ? w.pod_namespace + '/' : '') + w.pod_name;
  if (w.pod_uid) return 'pod ' + w.pod_uid.slice(0, 17);
  if (w.container_id) return (w.container_runtime || 'container') + ' ' + w.container_id.slice(0, SHORT_ID);
  if (w.slurm_job_id !== null && w.slurm_job_id !== undefined) return 'job ' + w.slurm_job_id;
  return '';
}
// "GPU 1", "GPUs 1, 3" held without an allocation, or '' when none is
export function unallocatedText(w) {
  const u = w && w.gpus_unallocated ? w.gpus_unallocated : [];
  return u.length ? 'GPU' + (u.length > 1 ? 's ' : ' ') + u.join(', ') + ' not allocated to its container' : '';
}
// [label, value, warn] rows for the hover and the list's tooltip
export function workloadRows(w) {
  if (!w) return [];
  const rows = [];
  if (w.pod_name) rows.push(['pod', (w.pod_namespace ? w.pod_namespace + '/' : '') + w.pod_name + (w.pod_uid ? ' (uid ' + w.pod_uid + ')' : ''), false]);
  else if (w.pod_uid) rows.push(['pod', 'uid ' + w.pod_uid, false]);
  if (w.container_name) rows.push(['container', w.container_name, false]);
  if (w.container_id) rows.push([(w.container_runtime || 'container') + ' id', w.container_id.slice(0, SHORT_ID), false]);
  if (w.slurm_job_id !== null && w.slurm_job_id !== undefined) rows.push(['Slurm job', String(w.slurm_job_id), false]);
  if (w.gpus_allocated) rows.push(['allocated', w.gpus_allocated.length ? w.gpus_allocated.join(', ') : 'no GPU', false]);
  const u = unallocatedText(w);
  if (u) rows.push(['not allocated', u, true]);
  return rows;
}
