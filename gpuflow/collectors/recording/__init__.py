"""The recording collector: a GPUFlow trace file shown as the agent that recorded it (``gpuflow open``).

A trace GPUFlow wrote (``gpuflow run --trace-out``, ``gpuflow export``, the page's save) is read
once, when the collector starts, into the recorder's columnar types; from then on it answers the
recorder's queries for the recorded range exactly as a live agent's collectors would, and its
snapshot is the recording's state at its end, marked as a recording. No GPU is needed.

Modules, one job each:

* ``options`` — its options: the file (given by ``gpuflow open``), the size it may have;
* ``loading`` — the file read, bounded, into a :class:`~gpuflow.collectors.recording.loading.Recording`;
* ``lanes`` — one lane's executions answering a window: exact columns or pixel buckets;
* ``readings`` — the readings answering a history query;
* ``final_state`` — the snapshot part: devices, processes and traced processes at the end;
* ``plugin`` — its hooks, the only way the rest of GPUFlow reaches it.

Constraints: importing this package does nothing; without a file the plugin answers nothing (it is
registered in every agent, and ``gpuflow open`` is the one command that gives it a file); the
file is untrusted input (gpuflow.export.trace_read bounds what it can make the reader hold).
"""
