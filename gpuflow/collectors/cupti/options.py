"""The CUPTI collector's options: ring capacity, flush period, spans kept per lane, the ring socket,
the caps on what one traced process's ring can make the agent hold, and the flight recorder's
retention (``--retain-mb``, ``--retain-s``: docs/recorder.md).

Declared through the ``declare_options`` hook (gpuflow.core.options), so ``gpuflow watch``/``run``
offer ``--ring-capacity`` and ``run`` offers ``--flush-ms``, ``get_app()`` reads
``GPUFLOW_RING_CAPACITY`` and ``GPUFLOW_RING_SOCKET``, and every value is checked here, by the
plugin that owns it (the ring socket's directory, which needs I/O, when the collector starts).
The bounds are the injected library's own (docs/inject.md): it refuses or clamps anything outside
them, so a value it would not honour is refused before a program starts. The caps (``max_names``,
``max_name_bytes``, ``max_lanes``, ``max_pending_names``: docs/decoder.md, "Caps") are read from
``GPUFLOW_MAX_*`` variables (no flags: they are rarely changed), within the decoders' own ranges
(``_layout.CAP_RANGES``).

Constraints: pure; importable without CUDA, a GPU or the compiled decoder.
"""

from __future__ import annotations

from typing import Any

from gpuflow.collectors.cupti import _layout, _retain_layout
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


def _cap(name: str, unit: str) -> Any:
    """The converter of one cap on what a ring can make the agent hold (docs/decoder.md, "Caps")."""
    low, high = _layout.CAP_RANGES[name]

    def convert(value: Any) -> int:
        number = _integer(value, unit)
        if not low <= number <= high:
            raise ValueError(f"must be between {low:,} and {high:,} {unit}, got {number:,}")
        return number

    convert.__name__ = name
    return convert


#: the caps on what one traced process's ring can make the agent hold, and their defaults
CAP_OPTIONS = (
    Option("max_names", _cap("max_names", "names"), _layout.DEFAULT_MAX_NAMES,
           "distinct names kept per traced process; the kernels of the rest are counted together",
           env="GPUFLOW_MAX_NAMES"),
    Option("max_name_bytes", _cap("max_name_bytes", "bytes"), _layout.DEFAULT_MAX_NAME_BYTES,
           "bytes of a kernel or stream name kept; longer names are shown cut", env="GPUFLOW_MAX_NAME_BYTES"),
    Option("max_lanes", _cap("max_lanes", "lanes"), _layout.DEFAULT_MAX_LANES,
           "lanes (device, context, stream) kept per traced process; executions beyond count on none",
           env="GPUFLOW_MAX_LANES"),
    Option("max_pending_names", _cap("max_pending_names", "names"), _layout.DEFAULT_MAX_PENDING_NAMES,
           "names a traced process may have half sent at once", env="GPUFLOW_MAX_PENDING_NAMES"),
)


def caps(values: Any) -> _layout.Caps:
    """The decoders' caps from this plugin's option values."""
    return _layout.Caps(**{option.name: values[option.name] for option in CAP_OPTIONS})


#: the flight recorder's budget: MiB of retained executions, all traced processes together
DEFAULT_RETAIN_MB = 256
#: its bounds: 0 switches retention off; at most 16 TiB (_retain_layout.BUDGET_RANGE)
MAX_RETAIN_MB = _retain_layout.BUDGET_RANGE[1] >> 20
#: the longest --retain-s: a week, the longest range the window API takes
MAX_RETAIN_S = 7 * 86_400


def retain_mb(value: Any) -> int:
    """MiB the retained executions may take: 0 (off) or 1 .. MAX_RETAIN_MB."""
    number = _integer(value, "MiB")
    if not 0 <= number <= MAX_RETAIN_MB:
        raise ValueError(f"must be between 0 (no retention) and {MAX_RETAIN_MB:,} MiB, got {number:,}")
    return number


def retain_s(value: Any) -> float | None:
    """Seconds retained at most (None: as long as the budget allows): a number in (0, a week]."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number of seconds, got {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {value!r}") from None
    if not 0 < number <= MAX_RETAIN_S:   # NaN fails too
        raise ValueError(f"must be more than 0 and at most {MAX_RETAIN_S:,} seconds (a week), got {value!r}")
    return number


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
    Option("retain_mb", retain_mb, DEFAULT_RETAIN_MB,
           f"MiB of traced executions the flight recorder keeps, all processes together, oldest out first "
           f"(default {DEFAULT_RETAIN_MB}; 0: none)", flag="--retain-mb", env="GPUFLOW_RETAIN_MB", metavar="MB"),
    Option("retain_s", retain_s, None,
           "seconds of traced executions the flight recorder keeps at most (default: what --retain-mb holds)",
           flag="--retain-s", env="GPUFLOW_RETAIN_S", metavar="S"),
    *CAP_OPTIONS,
))
