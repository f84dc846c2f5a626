"""The PM-sampling collector: GPU-metric rows (SM active and warps in flight across the SMs, DRAM
and PCIe throughput) sampled by CUPTI's PM sampling every millisecond, with ``--gpu-metrics``.

The agent holds no CUDA context: one helper process per GPU (``gpuflow-pm-sampler``, built from
cupti_src/pm_sampler.cpp) samples and hands its samples over in a sealed ring (cupti_src/pm_samples.h)
on a private socket; this package starts the helpers (samplers.py), takes and checks their rings
(handover.py, sample_ring.py), keeps the samples in a fixed budget (store.py) and answers
``query_history`` from them (plugin.py). docs/gpu-metrics.md, "PM sampling".
"""
