"""The CUPTI collector: reads the shared-memory rings written by libgpuflow_inject.so.

Modules, one job each:

* ``_layout`` — the ring's constants and header check, shared by both decoder twins;
* ``_ring.pxd`` / ``_decoder_c.pyx`` — the compiled decoder (hot path, no Python object per record);
* ``_decoder_py`` — its pure-Python twin (identical results, slow); ``decoder`` picks one;
* ``demangle`` — C++ names for display; ``build`` — decoder state to snapshot data types;
* ``rings`` — finding, mapping and cleaning up the rings of a session in /dev/shm;
* ``collector`` — the drain thread and the traced part of the snapshot; ``plugin`` — its hooks.

Constraints: importing this package does nothing (no threads, no /dev/shm access); the collector
starts only from the ``start_collecting`` hook, inside the serving process, and never imports the
NVML collector.
"""
