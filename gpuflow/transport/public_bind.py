"""Under gunicorn: a worker listening where other machines can reach it does not serve without a
strong token (the rule is gpuflow.transport.preflight's, the same as ``gpuflow watch``'s).

The addresses are read from the worker's own listening sockets when it starts, so ``-b``, a
config file, ``$PORT`` and inherited descriptors all count. Two ways in, one outcome each:

* **At worker start** (:func:`check_worker`): from ``get_app()`` in the worker (the usual case),
  or from gunicorn_conf.py's ``post_worker_init`` under ``--preload``. A refusal
  (:func:`refuse`, which ``get_app()`` also uses for any bad setting) logs one line and exits the
  worker with gunicorn's "app failed to load" status, on which the arbiter stops (status 4)
  instead of restarting the worker: nothing is served.
* **On each request** (:class:`PublicBindGuard`), only where neither could run: ``--preload``
  without gunicorn_conf.py, where the worker is unknown until it serves. A refusal answers every
  request 503 with the same line (logged once), before any route runs.

The explicit opt-out (``GPUFLOW_INSECURE_NO_AUTH=1``) is logged as an error-level warning at
every worker start.

Constraints: the message never holds the token; importing this module starts nothing.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, NoReturn

import falcon

from gpuflow.transport.preflight import exposure_error, exposure_warnings, listening_addresses
from gpuflow.transport.settings import AppSettings

TOKEN_HINT = "GPUFLOW_TOKEN_FILE or GPUFLOW_TOKEN"
APP_LOAD_ERROR = 4  #: gunicorn's Arbiter.APP_LOAD_ERROR: the arbiter halts rather than respawn


def refusal(worker: Any, settings: AppSettings) -> str | None:
    """Why this worker must not serve, as a one-line message, or None."""
    why = exposure_error(listening_addresses(worker), settings, TOKEN_HINT,
                         "set GPUFLOW_INSECURE_NO_AUTH=1")
    return None if why is None else f"gpuflow: refusing to serve: {why}"


def refuse(worker: Any, message: str) -> NoReturn:
    """Log ``message`` and exit the worker before it serves; gunicorn then stops (status 4)."""
    worker.log.error("%s", message)
    raise SystemExit(APP_LOAD_ERROR)


def check_worker(worker: Any, settings: AppSettings) -> None:
    """Refuse (exit the worker) if it must not serve; log the opt-out loudly."""
    why = refusal(worker, settings)
    if why is not None:
        refuse(worker, why)
    for line in exposure_warnings(listening_addresses(worker), settings):
        worker.log.error("gpuflow: WARNING: %s", line)


class PublicBindGuard:
    """Falcon middleware for ``--preload`` without gunicorn_conf.py: 503 on a refused bind."""

    def __init__(self, settings: AppSettings, find_worker: Callable[[], Any]) -> None:
        self.settings = settings
        self.find_worker = find_worker
        self._lock = threading.Lock()
        self._checked = False
        self._refusal: str | None = None

    def _verdict(self) -> str | None:
        with self._lock:
            if not self._checked:
                worker = self.find_worker()
                if worker is None:
                    return None  # not in a worker (yet): nothing to judge
                self._refusal = refusal(worker, self.settings)
                self._checked = True
                if self._refusal is not None:
                    worker.log.error("%s", self._refusal)
            return self._refusal

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        why = self._verdict()
        if why is not None:
            resp.status = falcon.HTTP_503
            resp.content_type = falcon.MEDIA_TEXT
            resp.text = why + "\n"
            resp.complete = True
