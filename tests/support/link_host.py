"""What a hub's Link asks of its hub, for tests that feed a Link bytes in-process (no network).

A :class:`LinkHost` has the hub's host table, no credentials, and answers whether a host is
watched (``watched``: full detail, whose lanes the link keeps) as the test says.
"""

from __future__ import annotations

from gpuflow.collectors.fleet.host_table import HostTable


class LinkHost:
    credentials = None

    def __init__(self, watched: bool = False) -> None:
        self.table = HostTable()
        self._watched = watched

    def changed(self, urgent: bool) -> None:
        pass

    def watched(self, name: str) -> bool:
        return self._watched
