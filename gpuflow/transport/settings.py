"""Transport settings: one frozen dataclass, and its construction from the environment.

``create_app`` takes an :class:`AppSettings`; the CLI builds one from its flags, ``get_app()``
from ``GPUFLOW_*`` variables (:func:`from_environ`, which also builds the agent's configuration
and the list of ``--plugin`` modules). Every bad value fails here, at start-up, with a message
that names the variable. The plugins' own variables (``GPUFLOW_RING_CAPACITY``, …) are theirs:
each plugin declares and checks them (gpuflow.core.options) when the agent is made.

Constraints: pure (no I/O, no threads); importable without starting anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

from gpuflow.core.context import AgentConfig

DEFAULT_MAX_STREAMS = 60  # gunicorn --threads 64 minus 4 for /api/snapshot, /metrics, / and /healthz
MAX_INTERVAL_MS = 3_600_000  # an hour; far larger waits overflow the platform's time_t in a thread
MAX_SECONDS = 86_400.0  # the cap on every timeout read from the environment, for the same reason


@dataclass(frozen=True)
class AppSettings:
    """How the app serves; every field has a safe default (loopback only, no token)."""

    ui_path: str | None = None  #: HTML served at /; None = gpuflow/ui/index.html
    token: str | None = None  #: when set, every route needs the cookie (or Bearer on /api, /metrics)
    allow_hosts: tuple[str, ...] = ()  #: Host names allowed besides loopback ("name", "*.domain", "*")
    metrics_per_process: bool = False  #: per-process series (pid, user) on /metrics
    max_streams: int = DEFAULT_MAX_STREAMS  #: concurrent /api/stream; beyond it 503 + Retry-After
    ping_interval_s: float = 15.0  #: ": ping" after this long without a frame
    max_stream_age_s: float = 600.0  #: a stream ends after this; EventSource reconnects by itself
    retry_ms: int = 2000  #: the SSE "retry:" sent once per stream
    retry_after_s: int = 5  #: Retry-After on 503 (stream cap, shutting down, no snapshot yet)
    first_snapshot_wait_s: float = 1.0  #: how long a data request waits for the first snapshot
    poll_s: float = 0.5  #: how often an idle stream checks for shutdown
    send_timeout_s: float = 30.0  #: a client that accepts no bytes for this long is dropped
    header_timeout_s: float = 10.0  #: a client silent this long while sending its request is dropped
    send_buffer_bytes: int = 256 * 1024  #: a stream socket's SO_SNDBUF (the kernel doubles it)
    start_agent: bool = True  #: start the agent on the first request if it is not running

    def __post_init__(self) -> None:
        if self.max_streams < 1:
            raise ValueError(f"max_streams must be >= 1, got {self.max_streams}")
        for name in ("ping_interval_s", "max_stream_age_s", "poll_s", "send_timeout_s",
                     "header_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.send_buffer_bytes < 4096:
            raise ValueError(f"send_buffer_bytes must be >= 4096, got {self.send_buffer_bytes}")
        if self.first_snapshot_wait_s < 0 or self.retry_ms < 0 or self.retry_after_s < 0:
            raise ValueError("waits and retry times must be >= 0")
        if self.token is not None and not self.token:
            raise ValueError("token must not be empty (use None for no token)")
        if "*" in self.allow_hosts and not self.token:
            raise ValueError("allowing any Host ('*') needs a token: without one, DNS rebinding "
                             "would let any web page read the stream")
        from gpuflow.transport.security import HostAllowList

        HostAllowList(self.allow_hosts)  # a malformed name or pattern fails here, at start-up


@dataclass(frozen=True)
class EnvConfig:
    """Everything ``get_app()`` reads from the environment."""

    settings: AppSettings
    agent: AgentConfig
    plugins: tuple[str, ...]


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name} must be 1/0, true/false, yes/no or on/off, got {raw!r}")


def _number(env: Mapping[str, str], name: str, kind: type, default, minimum=None, maximum=None):
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {raw!r}") from None
    if value != value:  # NaN passes every comparison below
        raise ValueError(f"{name} must be a number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {raw!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {raw!r}")
    return value


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in env.get(name, "").split(",") if x.strip())


def from_environ(environ: Mapping[str, str] | None = None) -> EnvConfig:
    """Read ``GPUFLOW_*`` (see docs/transport.md for the list); ValueError names a bad variable."""
    env = os.environ if environ is None else environ
    interval_ms = _number(env, "GPUFLOW_INTERVAL_MS", float, 1000.0, minimum=1,
                          maximum=MAX_INTERVAL_MS)
    agent = AgentConfig(
        interval_s=interval_ms / 1000.0,
        show_cmdline=_flag(env, "GPUFLOW_SHOW_CMDLINE"),
    )
    d = AppSettings()
    settings = AppSettings(
        ui_path=env.get("GPUFLOW_UI") or None,
        token=env.get("GPUFLOW_TOKEN") or None,
        allow_hosts=_list(env, "GPUFLOW_ALLOW_HOSTS"),
        metrics_per_process=_flag(env, "GPUFLOW_METRICS_PER_PROCESS"),
        max_streams=_number(env, "GPUFLOW_MAX_STREAMS", int, d.max_streams, minimum=1),
        ping_interval_s=_number(env, "GPUFLOW_PING_S", float, d.ping_interval_s, minimum=0.01,
                                maximum=MAX_SECONDS),
        max_stream_age_s=_number(env, "GPUFLOW_MAX_STREAM_AGE_S", float, d.max_stream_age_s,
                                 minimum=0.01, maximum=MAX_SECONDS),
        send_timeout_s=_number(env, "GPUFLOW_SEND_TIMEOUT_S", float, d.send_timeout_s,
                               minimum=0.01, maximum=MAX_SECONDS),
        header_timeout_s=_number(env, "GPUFLOW_HEADER_TIMEOUT_S", float, d.header_timeout_s,
                                 minimum=0.01, maximum=MAX_SECONDS),
        send_buffer_bytes=_number(env, "GPUFLOW_SEND_BUFFER_BYTES", int, d.send_buffer_bytes,
                                  minimum=4096, maximum=64 << 20),
    )
    return EnvConfig(settings=settings, agent=agent, plugins=_list(env, "GPUFLOW_PLUGINS"))
