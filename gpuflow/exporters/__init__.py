"""Exporters that push what the agent sees to other systems, as a page or a scrape reads it.

* :mod:`gpuflow.exporters.otlp` — OTLP/HTTP metrics (OpenTelemetry), ``--otlp-endpoint URL``.

Constraints: each reads the agent's snapshots (the board) and nothing else; imports only the core
(never a collector, the transport or the command line); a dependency of its own (the OpenTelemetry
SDK) is an install extra, imported only when the exporter is asked for.
"""
