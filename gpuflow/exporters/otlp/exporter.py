"""The OTLP/HTTP metrics exporter's thread: every ``interval_s``, the board's latest snapshot is
turned into metrics (:mod:`.mapping`) and sent with the OpenTelemetry SDK's OTLP/HTTP exporter.

``--otlp-endpoint URL`` (``GPUFLOW_OTLP_ENDPOINT``) is the receiver's base URL, as
``OTEL_EXPORTER_OTLP_ENDPOINT`` is (``/v1/metrics`` is appended), or the metrics URL itself when
it ends in ``/v1/metrics``. The SDK's own variables apply: ``OTEL_EXPORTER_OTLP_HEADERS`` (an
API key), ``OTEL_EXPORTER_OTLP_CERTIFICATE``, ``OTEL_EXPORTER_OTLP_COMPRESSION``. Plain ``http``
to a host other than loopback is allowed (a Collector beside the agent on its pod network is the
usual case) but said once at start, as the data crosses that network in clear text.

Each interval sends the latest snapshot (a quiet agent's unchanged one again: a gauge needs a
point per interval); an export that fails is logged once per kind of failure and dropped: the
next interval sends the state then. Only one export is in flight; one that takes longer than
the interval delays the next, never piles up.

Constraints: its own daemon thread; reads the board and nothing else; each export is bounded by
``timeout_s`` (the SDK's retries included); :meth:`stop` sends a last export and returns within
``timeout_s`` + 1 s.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.parse
from typing import Any, Callable

log = logging.getLogger("gpuflow.otlp")

DEFAULT_INTERVAL_S = 10.0
METRICS_PATH = "/v1/metrics"


def available() -> str | None:
    """None when the OpenTelemetry SDK and its OTLP/HTTP exporter can be imported, else why not."""
    try:
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
        import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError:
        return "the OpenTelemetry SDK is not installed (pip install 'gpuflow[otlp]')"
    return None


def metrics_url(endpoint: str) -> str:
    """The URL metrics are posted to; ValueError for what is not an http(s) URL."""
    parsed = urllib.parse.urlsplit(endpoint.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"expected an http:// or https:// URL of an OTLP receiver, got {endpoint!r}")
    if parsed.username or parsed.password:
        raise ValueError("put the receiver's credentials in OTEL_EXPORTER_OTLP_HEADERS, not in the URL")
    path = parsed.path.rstrip("/")
    if not path.endswith(METRICS_PATH):
        path += METRICS_PATH
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, path, parsed.query, ""))


class OtlpExporter:
    """Pushes ``latest()``'s snapshot to ``endpoint`` every ``interval_s``."""

    def __init__(self, latest: Callable[[], Any], endpoint: str, *, interval_s: float = DEFAULT_INTERVAL_S,
                 per_process: bool = False, timeout_s: float = 10.0, start_ns: int | None = None,
                 node_name: str | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        self.url = metrics_url(endpoint)
        self._latest = latest
        self.interval_s, self.per_process = interval_s, per_process
        self.timeout_s = min(timeout_s, max(interval_s, 1.0))
        self._start_ns = start_ns if start_ns is not None else time.time_ns()
        self._node_name = node_name if node_name is not None else (os.environ.get("NODE_NAME") or None)
        self._sdk = OTLPMetricExporter(endpoint=self.url, timeout=self.timeout_s)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: str | None = None
        self.sent = 0  #: exports the receiver accepted
        self.failed = 0  #: exports that failed

    def start(self) -> None:
        if self._thread is None:
            if urllib.parse.urlsplit(self.url).scheme == "http" and not _is_loopback(self.url):
                log.warning("OTLP metrics go to %s over plain http: in clear text on that network",
                            urllib.parse.urlsplit(self.url).hostname)
            self._thread = threading.Thread(target=self._run, name="gpuflow-otlp", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread after one last export."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 1.0)
            self._thread = None
        self._sdk.shutdown()

    def export_once(self) -> bool:
        """Send the latest snapshot now; whether the receiver took it (False: no snapshot yet)."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        from gpuflow.exporters.otlp.mapping import build

        snap = self._latest()
        if snap is None:
            return False
        data = build(snap, start_ns=self._start_ns, per_process=self.per_process, node_name=self._node_name)
        try:
            result = self._sdk.export(data, timeout_millis=self.timeout_s * 1000)
        except Exception as exc:  # noqa: BLE001 - the SDK raises on a bad URL, a refused TLS...
            return self._failed(f"{type(exc).__name__}")
        if result is not MetricExportResult.SUCCESS:
            return self._failed("the receiver did not accept it")
        if self._failing is not None:
            log.info("OTLP export to %s works again", self.url)
        self._failing = None
        self.sent += 1
        return True

    def _failed(self, why: str) -> bool:
        self.failed += 1
        if why != self._failing:
            log.warning("OTLP export to %s failed (%s); trying again every %g s", self.url, why,
                        self.interval_s)
        self._failing = why
        return False

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.export_once()
        self.export_once()


def _is_loopback(url: str) -> bool:
    import ipaddress

    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
