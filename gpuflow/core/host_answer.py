"""What a plugin answers for another host: a recorder route's answer, relayed as the host sent it.

A hub serves ``/api/window`` and ``/api/history`` for each host it follows by asking that host's
agent (the ``answer_for_host`` hook); the plugin that can reach the host (the fleet collector)
answers with a :class:`HostAnswer`, which the web app serves as it is. The answer's body is the
agent's, bounded by the plugin; the status and type are checked by the web app
(gpuflow.transport.host_routes) before they are served.

Constraints: pure data; names no collector and no transport.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the recorder's routes another host may be asked for
HOST_ROUTES = ("/api/window", "/api/history")


@dataclass(frozen=True, slots=True)
class HostAnswer:
    """A host's answer to a recorder route: its HTTP status, content type and body."""

    status: int
    content_type: str
    body: bytes
