"""The NVML collector: every NVIDIA GPU and every process holding one, polled at ``--interval``.

Layout, one job per module:

* ``backend.py`` - the thin :class:`NvmlBackend` interface (one method per NVML question);
* ``pynvml_backend.py`` - the real one, over nvidia-ml-py;
* ``fake_backend.py`` / ``fake_scenarios.py`` - scripted GPUs for tests and demos
  (``GPUFLOW_NVML_FAKE=<scenario>``);
* ``query.py`` - the one function every NVML call goes through ("not available" → None);
* ``procinfo.py`` - process name, user, redacted command line from /proc;
* ``sampler.py`` - the slow NVML readings, sampled on a background thread;
* ``readings.py`` - one GPU's share of a tick: its calls, their cleaning, unchanged objects reused;
* ``collector.py`` - the poll thread that builds the cached SnapshotPart;
* ``history.py`` / ``history_track.py`` - the readings over time, fed by each tick, answering
  ``query_history``;
* ``options.py`` - its options (the fake backend, nvmlInit's retry period, the history's budget);
* ``doctor.py`` - its lines in ``gpuflow doctor`` (the real NVML, through ``query.py``);
* ``factory.py`` / ``plugin.py`` - wiring into the agent as the pluggy plugin "nvml".

docs/nvml.md describes what is collected and how faults show up. Importing this package loads
no native library and starts nothing.
"""
