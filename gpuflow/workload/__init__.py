"""Who a GPU process belongs to: its container, Kubernetes pod and Slurm job.

* :mod:`gpuflow.workload.cgroup` — reads ``/proc/<pid>/cgroup`` (cgroup v1 and v2) into the
  container id (containerd, CRI-O, Docker), the pod UID and the Slurm job id;
* :mod:`gpuflow.workload.resolver` — one :class:`~gpuflow.core.snapshot.Workload` per pid, cached
  per pid (misses included), joined with the names and allocations below;
* :mod:`gpuflow.workload.kube_api` — pod, namespace and container names from the node's pods on
  the Kubernetes API (plain HTTPS with the service-account token; optional);
* :mod:`gpuflow.workload.pod_resources` — which devices the kubelet allocated to each container
  (its pod-resources gRPC socket; optional, needs the ``kubernetes`` extra: grpcio).

Constraints: imports only the core (gpuflow.core) and the standard library at import time (grpcio
only when the pod-resources socket is used); never a collector, the transport or the command
line, so any collector may use it. What /proc, the API server and the kubelet say is read as
untrusted input: bounded in size and time, checked against strict patterns.
"""
