"""Collector plugins shipped with GPUFlow (NVML, CUPTI, a recording); each is an ordinary pluggy plugin."""
