"""Transport settings: one frozen dataclass, and its construction from the environment and flags.

``create_app`` takes an :class:`AppSettings`. Both ways of serving build it here, through the one
function :func:`from_environ`: ``get_app()`` (gunicorn) from the ``GPUFLOW_*`` variables alone,
``gpuflow watch``/``run`` from the same variables with the flags given on the command line
overriding them (``overrides``). It also builds the agent's configuration and the list of
``--plugin`` modules. The token comes from a flag (``--token``, ``--token-file``), else from
``GPUFLOW_TOKEN_FILE`` or ``GPUFLOW_TOKEN``; ``auto`` asks for a generated one
(gpuflow.transport.tokens has the rules). Every bad value fails here, at start-up, with a
one-line message that names the flag or variable and never the token. The plugins' own
variables (``GPUFLOW_RING_CAPACITY``, …) are theirs: each plugin declares and checks them
(gpuflow.core.options) when the agent is made.

Constraints: no I/O but reading a token file; no threads; importable without starting anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

from gpuflow.core.context import AgentConfig
from gpuflow.core import gc_policy
from gpuflow.core.gil import AGENT_SWITCH_INTERVAL_S
from gpuflow.transport.tokens import GENERATE, TokenError, check_form, generate_token, read_token_file

DEFAULT_MAX_STREAMS = 60  # gunicorn --threads 64 minus 4 for /api/snapshot, /metrics, / and /healthz
MAX_INTERVAL_MS = 3_600_000  # an hour; far larger waits overflow the platform's time_t in a thread
MAX_SECONDS = 86_400.0  # the cap on every timeout read from the environment, for the same reason


@dataclass(frozen=True)
class AppSettings:
    """How the app serves; every field has a safe default (loopback only, no token)."""

    ui_path: str | None = None  #: HTML served at /; None = gpuflow/ui/index.html
    token: str | None = None  #: when set, every data route needs ``Authorization: Bearer <token>``
    insecure_no_auth: bool = False  #: a bind other machines can reach may serve without a token
    allow_hosts: tuple[str, ...] = ()  #: Host names allowed besides loopback ("name", "*.domain", "*")
    metrics_per_process: bool = False  #: per-process series (pid, user) on /metrics (and in OTLP)
    otlp_endpoint: str | None = None  #: push metrics to this OTLP/HTTP receiver (gpuflow.exporters.otlp)
    otlp_interval_s: float = 10.0  #: how often
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
        if self.token is not None:
            check_form(self.token, "the token")
        if "*" in self.allow_hosts and not self.token:
            raise ValueError("allowing any Host ('*') needs a token: without one, DNS rebinding "
                             "would let any web page read the stream")
        from gpuflow.transport.security import HostAllowList

        HostAllowList(self.allow_hosts)  # a malformed name or pattern fails here, at start-up


@dataclass(frozen=True)
class EnvConfig:
    """Everything ``get_app()`` (and the CLI, its flags applied) reads from the environment."""

    settings: AppSettings
    agent: AgentConfig
    plugins: tuple[str, ...]
    #: where the token came from: "--token", "--token-file", "GPUFLOW_TOKEN", "GPUFLOW_TOKEN_FILE",
    #: "generated" (``auto``), or None without a token
    token_source: str | None = None


#: What a command line can set, as ``overrides`` keys: AppSettings and AgentConfig field names,
#: plus ``token`` (the raw --token value, ``auto`` included) and ``token_file``. A switch is
#: passed only when it was given (a flag can turn a setting on, not off).
OVERRIDABLE = frozenset({"ui_path", "allow_hosts", "metrics_per_process", "insecure_no_auth",
                         "interval_s", "show_cmdline", "token", "token_file", "otlp_endpoint",
                         "switch_interval_s"})


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


def _gc_young_threshold(env: Mapping[str, str]) -> int:
    """``GPUFLOW_GC_YOUNG_THRESHOLD``: 0 (the interpreter's own policy) or a young threshold."""
    name = "GPUFLOW_GC_YOUNG_THRESHOLD"
    value = _number(env, name, int, gc_policy.AGENT_GC_YOUNG_THRESHOLD, minimum=0,
                    maximum=gc_policy.MAX_YOUNG_THRESHOLD)
    if 0 < value < gc_policy.MIN_YOUNG_THRESHOLD:
        raise ValueError(f"{name} must be 0 (the interpreter's own policy) or >= "
                         f"{gc_policy.MIN_YOUNG_THRESHOLD}, got {env[name].strip()!r}")
    return value


def _list(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in env.get(name, "").split(",") if x.strip())


def _check_otlp(endpoint: str, source: str) -> None:
    """An OTLP endpoint must be a receiver's URL, and the OpenTelemetry SDK must be there."""
    from gpuflow.exporters.otlp.exporter import available, metrics_url

    try:
        metrics_url(endpoint)
    except ValueError as exc:
        raise ValueError(f"{source}: {exc}") from None
    missing = available()
    if missing:
        raise ValueError(f"{source}: {missing}")


def resolve_token(env: Mapping[str, str], overrides: Mapping[str, Any],
                  may_generate: bool = True) -> tuple[str | None, str | None]:
    """The token and where it came from: a flag over a variable; ``auto`` makes a fresh one.

    ``may_generate`` is False under gunicorn, where every worker would make its own token.
    """
    if "token" in overrides and "token_file" in overrides:
        raise TokenError("give --token or --token-file, not both")
    if "token_file" in overrides:
        return read_token_file(overrides["token_file"], "--token-file"), "--token-file"
    if "token" in overrides:
        raw, source = overrides["token"], "--token"
    else:
        from_file = env.get("GPUFLOW_TOKEN_FILE") or None
        if from_file and env.get("GPUFLOW_TOKEN"):
            raise TokenError("set GPUFLOW_TOKEN or GPUFLOW_TOKEN_FILE, not both")
        if from_file:
            return read_token_file(from_file, "GPUFLOW_TOKEN_FILE"), "GPUFLOW_TOKEN_FILE"
        raw, source = env.get("GPUFLOW_TOKEN") or None, "GPUFLOW_TOKEN"
        if raw is None:
            return None, None
    if raw == GENERATE:
        if not may_generate:
            raise TokenError(f"{source}={GENERATE}: a generated token is for gpuflow watch and "
                             "run; give gunicorn a token of your own")
        return generate_token(), "generated"
    check_form(raw, source)
    return raw, source


def from_environ(environ: Mapping[str, str] | None = None,
                 overrides: Mapping[str, Any] | None = None, *,
                 may_generate: bool = True) -> EnvConfig:
    """Read ``GPUFLOW_*`` (see docs/transport.md for the list), then apply ``overrides``.

    ``overrides`` holds what the command line set (keys in :data:`OVERRIDABLE`; a key that is
    present wins over its variable). ValueError names a bad variable or flag.
    """
    env = os.environ if environ is None else environ
    given = dict(overrides or {})
    unknown = set(given) - OVERRIDABLE
    if unknown:
        raise TypeError(f"not a setting a command line can override: {sorted(unknown)}")
    interval_ms = _number(env, "GPUFLOW_INTERVAL_MS", float, 1000.0, minimum=1,
                          maximum=MAX_INTERVAL_MS)
    switch_ms = _number(env, "GPUFLOW_SWITCH_INTERVAL_MS", float, AGENT_SWITCH_INTERVAL_S * 1000.0,
                        minimum=0.05, maximum=100.0)
    agent = AgentConfig(
        interval_s=given.pop("interval_s", interval_ms / 1000.0),
        show_cmdline=bool(given.pop("show_cmdline", False)) or _flag(env, "GPUFLOW_SHOW_CMDLINE"),
        switch_interval_s=given.pop("switch_interval_s", switch_ms / 1000.0),
        gc_young_threshold=_gc_young_threshold(env),
    )
    token, token_source = resolve_token(env, given, may_generate)
    given.pop("token", None)
    given.pop("token_file", None)
    d = AppSettings()
    fields: dict[str, Any] = dict(
        ui_path=env.get("GPUFLOW_UI") or None,
        token=token,
        insecure_no_auth=_flag(env, "GPUFLOW_INSECURE_NO_AUTH"),
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
        otlp_endpoint=env.get("GPUFLOW_OTLP_ENDPOINT", "").strip() or None,
        otlp_interval_s=_number(env, "GPUFLOW_OTLP_INTERVAL_S", float, d.otlp_interval_s, minimum=0.1,
                                maximum=MAX_SECONDS),
    )
    fields.update(given)   # a flag given replaces its variable
    if fields["otlp_endpoint"]:
        _check_otlp(fields["otlp_endpoint"],
                    "--otlp-endpoint" if "otlp_endpoint" in given else "GPUFLOW_OTLP_ENDPOINT")
    return EnvConfig(settings=AppSettings(**fields), agent=agent,
                     plugins=_list(env, "GPUFLOW_PLUGINS"), token_source=token_source)
