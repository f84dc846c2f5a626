"""A local OTLP/HTTP metrics receiver for the exporter's tests: ``POST /v1/metrics`` with a
protobuf ``ExportMetricsServiceRequest`` (gzip or not), decoded with OpenTelemetry's own generated
classes (opentelemetry-proto) and kept, answered as a Collector answers.

:func:`points` flattens what it received into plain rows a test can compare: (resource
attributes, metric name, unit, kind, point attributes, value).

Constraints: 127.0.0.1 only; a body is read up to 16 MiB; stopped by its owner.
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
)

MAX_BODY = 16 << 20


class OtlpReceiver:
    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.content_types: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                size = int(self.headers.get("Content-Length", "0"))
                assert self.path == "/v1/metrics" and 0 <= size <= MAX_BODY, (self.path, size)
                body = self.rfile.read(size)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                owner.requests.append(request)
                owner.content_types.append(self.headers.get("Content-Type", ""))
                answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(kvs) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def points(request: ExportMetricsServiceRequest) -> list[tuple[dict, str, str, str, dict, float]]:
    """(resource attributes, name, unit, kind, point attributes, value) of every data point;
    kind is ``gauge``, ``counter`` (a monotonic cumulative sum) or ``updowncounter``."""
    rows = []
    for rm in request.resource_metrics:
        resource = attributes(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                data = m.WhichOneof("data")
                if data == "gauge":
                    kind, dps = "gauge", m.gauge.data_points
                else:
                    assert data == "sum" and m.sum.aggregation_temporality == 2  # cumulative
                    kind, dps = ("counter" if m.sum.is_monotonic else "updowncounter"), m.sum.data_points
                for dp in dps:
                    value = dp.as_double if dp.WhichOneof("value") == "as_double" else dp.as_int
                    rows.append((resource, m.name, m.unit, kind, attributes(dp.attributes), value))
    return rows
