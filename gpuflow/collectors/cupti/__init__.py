"""The CUPTI collector: reads the rings written by libgpuflow_inject.so, handed over a private socket.

Modules, one job each:

* ``_layout`` — the ring's constants and header check, shared by both decoder twins;
* ``_ring.pxd`` / ``_decoder_c.pyx`` (typed by ``_decoder_c.pyi``) — the compiled decoder (hot
  path, no Python object per record);
* ``_decoder_py`` — its pure-Python twin (identical results, slow); ``decoder`` picks one;
  ``protocol`` — the ``RingDecoder`` type both satisfy;
* ``demangle`` — C++ names for display (in a helper process); ``traced_builder`` — decoder state to the snapshot's
  TracedProcess; ``retire`` — folding exited processes into the session's roll-up;
* ``handover`` — the private socket traced processes hand their rings to, and what it accepts;
  ``rings`` — checking and mapping one handed-over ring;
* ``collector`` — the drain thread and the traced part of the snapshot; ``caps`` — the caps a
  traced process reached, as Problems;
* ``options`` — its options and flags; ``injection`` — the injection library, libcupti and a
  launched program's environment; ``doctor`` — its lines in ``gpuflow doctor``;
* ``plugin`` — its hooks, the only way the rest of GPUFlow reaches it.

Constraints: importing this package does nothing (no threads, no sockets, no files); the collector
starts only from the ``start_collecting`` hook, inside the serving process, and never imports the
NVML collector.
"""
