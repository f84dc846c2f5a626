"""OTLP/HTTP metrics: the snapshot's GPUs, processes and traced processes, pushed to an
OpenTelemetry Collector (or any OTLP receiver) every interval.

* :mod:`.mapping` — a snapshot → the SDK's ``MetricsData``: ``hw.gpu.*`` and ``hw.*`` semantic
  conventions where they exist (status Development), ``gpuflow.*`` where they are silent; one
  resource for the host (``host.name``), one per process (``process.pid``, ``k8s.*``,
  ``container.id``) when per-process series are on;
* :mod:`.exporter` — the thread that reads the board and sends, through the SDK's OTLP/HTTP
  exporter (protobuf; retries, compression, TLS and headers as its ``OTEL_EXPORTER_OTLP_*``
  variables say).

No span per kernel: a busy program runs 10-100 thousand a second; the recorder's Perfetto export
is the trace path (docs/recorder.md). Needs the ``otlp`` extra (``pip install 'gpuflow[otlp]'``).
"""
