"""The CUPTI collector's options: ring capacity, flush period, spans kept per lane, the ring socket.

Declared through the ``declare_options`` hook (gpuflow.core.options), so ``gpuflow watch``/``run``
offer ``--ring-capacity`` and ``run`` offers ``--flush-ms``, ``get_app()`` reads
``GPUFLOW_RING_CAPACITY`` and ``GPUFLOW_RING_SOCKET``, and every value is checked here, by the
plugin that owns it (the ring socket's directory, which needs I/O, when the collector starts).
The bounds are the injected library's own (docs/inject.md): it refuses or clamps anything outside
them, so a value it would not honour is refused before a program starts.

Constraints: pure; importable without CUDA, a GPU or the compiled decoder.
"""

from __future__ import annotations

from typing import Any

from gpuflow.collectors.cupti import _layout
from gpuflow.core.options import Option, PluginOptions

KEY = "cupti"
DEFAULT_RING_CAPACITY = 1 << 16
MIN_RING_CAPACITY, MAX_RING_CAPACITY = 1 << 10, 1 << 26
DEFAULT_FLUSH_MS = 50
MIN_FLUSH_MS, MAX_FLUSH_MS = 5, 10_000
DEFAULT_LANE_SPAN_CAP = _layout.DEFAULT_LANE_SPAN_CAP
#: sun_path holds 108 bytes, the terminating NUL included (handover.MAX_SOCKET_PATH).
MAX_SOCKET_PATH = 107


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a whole number of {what}, got {value!r}")
    if isinstance(value, int):
        return value
    try:
        return int(value, 0)
    except ValueError:
        raise ValueError(f"expected a whole number of {what}, got {value!r}") from None


def ring_capacity(value: Any) -> int:
    """Records per ring: a power of two in [2^10, 2^26]."""
    number = _integer(value, "records")
    if number <= 0 or number & (number - 1):
        raise ValueError(f"ring capacity must be a power of two, got {number}")
    if not MIN_RING_CAPACITY <= number <= MAX_RING_CAPACITY:
        raise ValueError(f"ring capacity must be between {MIN_RING_CAPACITY} and "
                         f"{MAX_RING_CAPACITY} records, got {number}")
    return number


def flush_ms(value: Any) -> int:
    """How often the traced program hands its records over, in [5, 10000] ms."""
    number = _integer(value, "milliseconds")
    if number <= 0:
        raise ValueError(f"must be a positive number of milliseconds, got {number}")
    if number > MAX_FLUSH_MS:
        raise ValueError(f"must be at most {MAX_FLUSH_MS} milliseconds, got {number}")
    if number < MIN_FLUSH_MS:
        raise ValueError(f"must be at least {MIN_FLUSH_MS} milliseconds, got {number}")
    return number


def lane_span_cap(value: Any) -> int:
    """Spans kept per lane, most recent first: the decoders' own bounds, [0, 2^20]."""
    return _layout.check_lane_span_cap(_integer(value, "spans"))


def ring_socket(value: Any) -> str:
    """Where the agent listens for rings: an absolute path that fits a Unix socket address."""
    if not isinstance(value, str) or not value.startswith("/") or "\0" in value:
        raise ValueError(f"the ring socket must be an absolute path, got {value!r}")
    if len(value.encode()) > MAX_SOCKET_PATH:
        raise ValueError(f"the ring socket path is longer than {MAX_SOCKET_PATH} bytes: {value!r}")
    return value


OPTIONS = PluginOptions(KEY, (
    Option("ring_capacity", ring_capacity, DEFAULT_RING_CAPACITY,
           f"records per traced process ring, a power of two (default {DEFAULT_RING_CAPACITY})",
           flag="--ring-capacity", env="GPUFLOW_RING_CAPACITY", metavar="N"),
    Option("flush_ms", flush_ms, DEFAULT_FLUSH_MS,
           f"how often the traced program hands records to GPUFlow (default {DEFAULT_FLUSH_MS})",
           flag="--flush-ms", metavar="MS", commands=("run",)),
    Option("lane_span_cap", lane_span_cap, DEFAULT_LANE_SPAN_CAP,
           "spans kept per lane, most recent first"),
    Option("ring_socket", ring_socket, None,
           "listen for the rings of programs started with GPUFlow's injection environment on this "
           "socket, in a directory only you can enter (a gunicorn deployment; gpuflow run makes its own)",
           env="GPUFLOW_RING_SOCKET"),
))
