"""Collector plugins shipped with GPUFlow (NVML, CUPTI); each is an ordinary pluggy plugin."""
