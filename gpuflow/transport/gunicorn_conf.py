"""gunicorn settings and hooks for serving GPUFlow as a deployed app.

    gunicorn -c python:gpuflow.transport.gunicorn_conf 'gpuflow.transport.app:get_app()' -b 127.0.0.1:7717

* ``gthread``, one worker: GPU state is host-wide, so N workers would poll NVML N times and fight
  over each trace ring; each open stream holds one thread, so ``threads`` must exceed
  ``GPUFLOW_MAX_STREAMS`` (default 60) by a few for /api/snapshot, /metrics, / and /healthz.
* ``graceful_timeout = 5``: streams end within ``poll_s`` of SIGTERM, so this is only a backstop.
* ``max_requests = 0``: with one worker, a restart drains through graceful_timeout with nobody
  accepting connections.
* ``post_worker_init`` hands the worker to the app (open streams end as soon as ``worker.alive``
  turns false, also under ``--preload``), installs :mod:`gpuflow.transport.gunicorn_hardening`
  (error pages, request heads read off the pool, read timeout; ``get_app()`` does it too,
  except under ``--preload``) and starts the collectors at boot rather than on the first request;
  ``worker_exit`` stops them (collectors drain, NVML shuts down).

Without this file ``get_app()`` still works: it finds the worker through its SIGTERM handler,
starts the agent on the first request and stops it at exit (atexit). Command-line flags
override the values here (e.g. ``--threads 256`` for 250 streams).

Constraints: plain module-level gunicorn settings; hooks run in the worker process; nothing
happens at import.
"""

from __future__ import annotations

import os

worker_class = "gthread"
workers = 1
threads = 64
timeout = 30
graceful_timeout = 5
max_requests = 0
keepalive = 5


def post_worker_init(worker) -> None:
    from gpuflow.transport.app import LIVE_APPS
    from gpuflow.transport.gunicorn_hardening import harden_worker
    from gpuflow.transport.public_bind import check_worker

    cfg = worker.cfg
    for app in LIVE_APPS:
        state = app.state
        if cfg.preload_app:   # get_app() ran in the arbiter: judge the bind here (public_bind.py)
            check_worker(worker, state.settings)
        state.attach_worker(worker)
        harden_worker(worker, state.settings.header_timeout_s)
        if cfg.workers > 1:
            worker.log.warning("gpuflow: %d workers each poll the GPUs and drain the rings; "
                               "use --workers 1", cfg.workers)
        if cfg.threads < state.settings.max_streams + 4:
            worker.log.warning("gpuflow: --threads %d leaves too few threads for "
                               "GPUFLOW_MAX_STREAMS=%d: streams past %d wait unanswered instead "
                               "of getting 503; use --threads %d", cfg.threads,
                               state.settings.max_streams, max(cfg.threads - 4, 0),
                               state.settings.max_streams + 4)
        state.ensure_started()


def worker_exit(server, worker) -> None:
    # gunicorn also calls this in the arbiter when it reaps a worker; only the worker acts.
    if os.getpid() != worker.pid:
        return
    from gpuflow.transport.app import LIVE_APPS

    for app in LIVE_APPS:
        app.close()
