"""Exports of what the flight recorder retains, in formats other tools read.

* :mod:`gpuflow.export.perfetto` — the one definition of GPUFlow's Perfetto trace (TrackEvent
  protobuf): tracks per process → device → stream, kernels and copies as slices with their
  arguments, device and process readings as counter tracks;
* :mod:`gpuflow.export.slices` — the hot loop that turns a lane's span columns into slice
  packets, compiled (``_slices_c``) or its pure-Python twin (``_slices_py``), with
  :mod:`~gpuflow.export.launch_args` (a lane's occupancy and bandwidth arguments, encoded once
  per launch configuration);
* :mod:`gpuflow.export.window_export` — an export of a time range from anything that answers the
  recorder's queries (the agent), asked in pieces so that memory stays bounded however much is
  retained;
* :mod:`gpuflow.export.trace_read` — a GPUFlow trace read back into the recorder's columns (what
  ``gpuflow open`` shows), with :mod:`~gpuflow.export.trace_tracks` (its track layout) and
  :mod:`~gpuflow.export.protoread` (the protobuf wire, bounded: the file is untrusted).

Constraints: imports only the core (gpuflow.core), never a collector, the transport or the command
line, so the web app (``/api/export``) and the command line (``gpuflow export``, ``gpuflow run
--trace-out``) share it and neither needs a collector.
"""
