"""The Falcon WSGI app: ``create_app`` (pure, for tests and the CLI) and ``get_app`` (gunicorn).

Routes (GET and HEAD; anything else 405):

* ``/`` — the UI page (:mod:`gpuflow.transport.ui`), served without a token like its modules
  (it holds no data; with a token it asks for it and sends it as a Bearer header);
* ``/api/snapshot`` — the latest snapshot as JSON (docs/snapshot.md);
* ``/api/stream`` — Server-Sent Events (:mod:`gpuflow.transport.sse`), the whole snapshot or its
  summary (``detail=summary``, :mod:`gpuflow.transport.stream_views`);
* ``/api/window``, ``/api/history`` — the flight recorder's answers
  (:mod:`gpuflow.transport.recorded_api`), or with ``host=<name>`` another host's, relayed by the
  plugin that follows it (:mod:`gpuflow.transport.host_routes`);
* ``/api/export`` — a range of them as a Perfetto trace to save (:mod:`gpuflow.transport.export_api`);
* ``/metrics`` — Prometheus text (:mod:`gpuflow.transport.metrics`);
* ``/healthz`` — ``{"status": "ok"|"starting"|"stopping", ...}``, 503 unless ok;
* ``/favicon.ico`` — 204 (the UI has no icon; this keeps browser consoles free of 404s).
* ``/<module>.js`` — the page's ES modules, a fixed list found when the app is made
  (:func:`gpuflow.transport.ui.module_routes`); any other path is a 404.

Deployment: ``gunicorn 'gpuflow.transport.app:get_app()' -k gthread --workers 1 --threads 64``
(optionally ``-c python:gpuflow.transport.gunicorn_conf``). ``get_app()`` reads ``GPUFLOW_*``
(:func:`gpuflow.transport.settings.from_environ`) and builds the plugin manager and the agent
but starts nothing: collectors start inside the worker, on the first request (or from the
``post_worker_init`` hook), never at import and never before a fork. Data requests wait up to
``first_snapshot_wait_s`` (1 s) for the first snapshot. Open streams end promptly when the
gunicorn worker stops (its ``alive`` flag, found from the worker's SIGTERM handler or given by
the hook) or when :meth:`GpuflowApp.begin_shutdown` is called (embedded server); the agent this
app started is stopped by :meth:`GpuflowApp.close` (worker exit, atexit). In a gunicorn worker,
``get_app()`` also installs :mod:`gpuflow.transport.gunicorn_hardening` (the worker's own error
pages without echo and with the security headers; a read timeout on request heads).

Constraints: importing this module starts nothing and reads no environment; create_app does no
I/O; every resource gets its collaborators through ``TransportState``.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
import time
from typing import Any, Mapping, Sequence

import falcon
import pluggy

from gpuflow.core.board import SnapshotBoard
from gpuflow.core.context import AgentConfig
from gpuflow.core.snapshot import Snapshot
from gpuflow.transport.frames import FrameEncoder, dumps
from gpuflow.transport.export_api import ExportResource
from gpuflow.transport.host_routes import HostRecorderRoute
from gpuflow.transport.metrics import MetricsResource, SnapshotCollector, make_registry
from gpuflow.transport.recorded_api import HistoryResource, WindowResource
from gpuflow.transport.security import SecurityMiddleware
from gpuflow.transport.settings import AppSettings, from_environ
from gpuflow.transport.sse import StreamSlots
from gpuflow.transport.stream_views import ViewStreamResource
from gpuflow.transport.ui import FaviconResource, IndexResource, module_routes

__all__ = ["AppSettings", "GpuflowApp", "TransportState", "assemble_app", "create_app", "get_app"]


class TransportState:
    """What every resource shares: board, agent (optional), encoder, stream slots, shutdown."""

    def __init__(self, source: Any, settings: AppSettings) -> None:
        if isinstance(source, SnapshotBoard):
            self.agent, self.board = None, source
        elif isinstance(getattr(source, "board", None), SnapshotBoard):
            self.agent, self.board = source, source.board
        else:
            raise TypeError(f"create_app needs an Agent or a SnapshotBoard, not {type(source).__name__}")
        self.settings = settings
        self.frames = FrameEncoder(self.board, boot_epoch=getattr(self.agent, "boot_epoch", None))
        self.slots = StreamSlots(settings.max_streams)
        self._shutdown = threading.Event()
        self._worker: Any = None
        self._lock = threading.Lock()
        self._started = False
        self._owns_agent = False
        self._closed = False
        self.otlp: Any = None  #: the OTLP metrics exporter, once started (settings.otlp_endpoint)

    # -- lifecycle -------------------------------------------------------------------------------
    def ensure_started(self) -> None:
        """Start the agent if it is not running (once, thread-safe, only in the serving process)."""
        if self._started or self.agent is None or not self.settings.start_agent:
            return
        with self._lock:
            if self._started or self._shutdown.is_set():
                return
            if not self.agent.running:
                self.agent.start()
                self._owns_agent = True
            self._started = True
            if self.settings.otlp_endpoint:
                from gpuflow.exporters.otlp.exporter import OtlpExporter

                boot_ms = getattr(self.agent, "boot_epoch", None)
                self.otlp = OtlpExporter(self.board.latest, self.settings.otlp_endpoint,
                                         interval_s=self.settings.otlp_interval_s,
                                         per_process=self.settings.metrics_per_process,
                                         start_ns=boot_ms * 1_000_000 if boot_ms else None)
                self.otlp.start()

    def attach_worker(self, worker: Any) -> None:
        """Streams end once ``worker.alive`` turns false (gunicorn's graceful stop)."""
        self._worker = worker

    def stopping(self) -> bool:
        worker = self._worker
        return self._shutdown.is_set() or (worker is not None and not worker.alive)

    def begin_shutdown(self) -> None:
        """Refuse new streams and end the open ones within ``poll_s``."""
        self._shutdown.set()

    def close(self) -> None:
        """Shut down and stop the agent if this app started it. Idempotent."""
        self.begin_shutdown()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            owns = self._owns_agent
        if self.otlp is not None:
            self.otlp.stop()   # one last export, of the agent's last snapshot
        if owns and self.agent is not None:
            self.agent.stop()

    def wait_first_snapshot(self) -> Snapshot | None:
        self.ensure_started()
        latest = self.board.latest()
        if latest is not None:
            return latest
        return self.board.wait_first(self.settings.first_snapshot_wait_s)


class GpuflowApp(falcon.App):
    """falcon.App plus its :class:`TransportState` and the two shutdown calls servers need."""

    state: TransportState

    def begin_shutdown(self) -> None:
        self.state.begin_shutdown()

    def close(self) -> None:
        self.state.close()


class _StartAgent:
    """Middleware: the first request that passed the security checks starts the agent."""

    def __init__(self, state: TransportState) -> None:
        self.state = state

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.state.ensure_started()


class SnapshotResource:
    def __init__(self, state: TransportState) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.state.wait_first_snapshot()
        cached = self.state.frames.snapshot_json()
        resp.content_type = falcon.MEDIA_JSON
        if cached is None:
            resp.status = falcon.HTTP_503
            resp.set_header("Retry-After", "1")
            resp.data = b'{"error":"no snapshot yet"}'
            return
        resp.data = cached[1]

    on_head = on_get


class HealthResource:
    def __init__(self, state: TransportState) -> None:
        self.state = state

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        state = self.state
        snap = state.wait_first_snapshot()
        status = "stopping" if state.stopping() else ("starting" if snap is None else "ok")
        body: dict[str, Any] = {"status": status, "streams": state.slots.open}
        if snap is not None:
            body["seq"] = snap.seq
            body["age_s"] = round(max(0.0, time.time() - snap.timestamp), 3)
        resp.status = falcon.HTTP_200 if status == "ok" else falcon.HTTP_503
        resp.content_type = falcon.MEDIA_JSON
        resp.data = dumps(body)

    on_head = on_get


def create_app(agent_or_hub: Any, *, settings: AppSettings | None = None) -> GpuflowApp:
    """The WSGI app over an Agent (started lazily on the first request) or a bare SnapshotBoard."""
    settings = settings if settings is not None else AppSettings()
    state = TransportState(agent_or_hub, settings)
    app = GpuflowApp(
        middleware=[SecurityMiddleware(settings.allow_hosts, settings.token), _StartAgent(state)],
        cors_enable=False,
    )
    app.state = state
    app.add_route("/", IndexResource(settings.ui_path))
    for route, module in module_routes():   # the page's ES modules, a fixed list
        app.add_route(route, module)
    app.add_route("/favicon.ico", FaviconResource())
    app.add_route("/api/snapshot", SnapshotResource(state))
    app.add_route("/api/stream", ViewStreamResource(state))
    app.add_route("/api/window", HostRecorderRoute(state, WindowResource(state), "/api/window"))
    app.add_route("/api/history", HostRecorderRoute(state, HistoryResource(state), "/api/history"))
    app.add_route("/api/export", ExportResource(state))
    collector = SnapshotCollector(state.board.latest, settings.metrics_per_process, state.slots)
    app.add_route("/metrics", MetricsResource(state, make_registry(collector)))
    app.add_route("/healthz", HealthResource(state))
    return app


def assemble_app(config: AgentConfig, settings: AppSettings, *, plugins: Sequence[str] = (),
                 plugin_manager: pluggy.PluginManager | None = None,
                 environ: Mapping[str, str] | None = None) -> GpuflowApp:
    """Plugin manager + agent + app: the one assembly, used by ``get_app()`` and the CLI.

    ``plugin_manager`` is built from ``plugins`` (``--plugin`` modules) unless the caller has
    one already (the CLI loads the plugins to parse their flags). Starts nothing. Raises
    :class:`~gpuflow.core.plugins.PluginLoadError` or :class:`~gpuflow.core.options.OptionError`
    with a one-line message.
    """
    from gpuflow.core.agent import Agent
    from gpuflow.core.plugins import get_plugin_manager

    pm = plugin_manager if plugin_manager is not None else get_plugin_manager(plugins, environ)
    return create_app(Agent(config, pm, environ=environ), settings=settings)


#: Apps built by get_app() in this process, for the gunicorn hooks (gunicorn_conf.py).
LIVE_APPS: list[GpuflowApp] = []


def get_app() -> GpuflowApp:
    """The app as gunicorn loads it: ``gunicorn 'gpuflow.transport.app:get_app()'``.

    Reads GPUFLOW_INTERVAL_MS, GPUFLOW_PLUGINS, GPUFLOW_TOKEN or GPUFLOW_TOKEN_FILE,
    GPUFLOW_INSECURE_NO_AUTH, GPUFLOW_ALLOW_HOSTS, GPUFLOW_SHOW_CMDLINE,
    GPUFLOW_METRICS_PER_PROCESS, GPUFLOW_MAX_STREAMS, GPUFLOW_UI, GPUFLOW_PING_S,
    GPUFLOW_MAX_STREAM_AGE_S, GPUFLOW_SEND_TIMEOUT_S, GPUFLOW_HEADER_TIMEOUT_S,
    GPUFLOW_SEND_BUFFER_BYTES, GPUFLOW_OTLP_ENDPOINT, GPUFLOW_OTLP_INTERVAL_S; the plugin manager reads GPUFLOW_DISABLED_PLUGINS and
    GPUFLOW_DISABLE_PLUGIN_AUTOLOAD, and each plugin its own variables (GPUFLOW_RING_CAPACITY,
    GPUFLOW_SESSION, … : docs/transport.md). Checks GPUFLOW_UI (a regular file of bounded size)
    and, in a gunicorn worker, that a bind other machines can reach has a strong token
    (:mod:`gpuflow.transport.public_bind`). Builds the agent; starts nothing. A bad setting
    raises ValueError with a one-line message; in a gunicorn worker that line is logged and
    the worker exits with gunicorn's "app failed to load" status, which stops gunicorn.
    """
    from gpuflow.transport.preflight import check_ui_file
    from gpuflow.transport.public_bind import PublicBindGuard, check_worker, refuse

    worker = current_gunicorn_worker()
    try:
        env = from_environ(may_generate=False)
        if env.settings.ui_path is not None:
            check_ui_file(env.settings.ui_path, "GPUFLOW_UI")
    except ValueError as exc:
        if worker is None:
            raise
        refuse(worker, f"gpuflow: refusing to serve: {exc}")
    if worker is not None:
        check_worker(worker, env.settings)
    app = assemble_app(env.agent, env.settings, plugins=env.plugins)
    if worker is not None:
        from gpuflow.transport.gunicorn_hardening import harden_worker

        app.state.attach_worker(worker)
        harden_worker(worker, env.settings.header_timeout_s)  # error pages, head read timeout
    elif "gunicorn.arbiter" in sys.modules:   # --preload: the worker is known only once it serves
        app.add_middleware(PublicBindGuard(env.settings, current_gunicorn_worker))
    LIVE_APPS.append(app)
    atexit.register(app.close)
    return app


def current_gunicorn_worker() -> Any:
    """The gunicorn worker running this process, found through its SIGTERM handler, or None.

    gunicorn installs ``worker.handle_exit`` before it loads the app (without ``--preload``), so
    the bound method leads to the worker and its ``alive`` flag. With ``--preload`` the app is
    loaded in the arbiter and this returns None: use gunicorn_conf.py's post_worker_init then.
    """
    base = sys.modules.get("gunicorn.workers.base")
    if base is None:
        return None
    owner = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return owner if isinstance(owner, base.Worker) else None
