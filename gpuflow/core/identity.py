"""Who an agent is: its host's name in a fleet, and the boot epoch that tells its restarts apart.

The name is ``NODE_NAME`` when it is set (Kubernetes passes the node's name there through the
Downward API, and a pod's own hostname is the pod's name), else the machine's hostname. The boot
epoch is the wall clock, in milliseconds, when the agent was made; the stream's event ids carry it
(``<boot_epoch>-<seq>``), so a hub that reconnects tells a restarted agent from a resumed one.

A host name travels far: it is a key of a hub's view, a query value (``/api/stream?host=``), a
word on the page and in logs. So it is checked here, once, by :func:`check_host_name`, for the
agent's own name and for every name a hub hears from an agent: 1 to 253 characters of letters,
digits, ``.``, ``-`` and ``_``, not starting with ``.`` or ``-``.

Constraints: pure but for reading the clock and the hostname; names no collector.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import dataclass
from typing import Mapping

from gpuflow.core.options import OptionError

#: longest host name (a DNS name's limit)
MAX_HOST_NAME = 253
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
#: where a machine's hostname cannot be a host name (it holds other characters)
UNNAMED_HOST = "localhost"


def check_host_name(value: object) -> str:
    """``value`` if it is a host name as this module defines it, else ValueError saying why."""
    if not isinstance(value, str):
        raise ValueError(f"a host name must be text, not {type(value).__name__}")
    if not value:
        raise ValueError("the host name is empty")
    if len(value) > MAX_HOST_NAME:
        raise ValueError(f"the host name is {len(value)} characters long, more than {MAX_HOST_NAME}")
    if not _HOST_NAME.fullmatch(value):
        raise ValueError("a host name holds only letters, digits, '.', '-' and '_', and does not "
                         "start with '.' or '-'")
    return value


@dataclass(frozen=True)
class Identity:
    """An agent's name in a fleet and its boot epoch (ms since the Unix epoch)."""

    name: str
    boot_epoch: int


def host_name(environ: Mapping[str, str]) -> str:
    """``NODE_NAME`` if set and not blank (OptionError if it is not a host name), else the
    hostname (:data:`UNNAMED_HOST` where the hostname is not one)."""
    given = environ.get("NODE_NAME", "").strip()
    if given:
        try:
            return check_host_name(given)
        except ValueError as exc:
            raise OptionError(f"NODE_NAME: {exc}") from None
    try:
        return check_host_name(socket.gethostname())
    except ValueError:
        return UNNAMED_HOST


def new_identity(environ: Mapping[str, str], clock=time.time) -> Identity:
    """This agent's identity, its boot epoch taken now."""
    return Identity(name=host_name(environ), boot_epoch=int(clock() * 1000))
