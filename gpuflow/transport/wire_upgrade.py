"""A schema-2 stream frame (an agent from before hosts were named) as the schema-4 frame it would be.

Schema 4 is schema 2 with the host named: ``host`` gains ``name``, ``boot_epoch`` and
``interval_s``, a ``hosts`` list holds the agent's own entry (a fleet of one), and every device,
process, traced process and retired roll-up carries ``host``. An old agent knows no name of its
own, so the name is its hostname when that is a host name (gpuflow.core.identity), else the
fallback its reader was given (a hub gives the target's address), else ``localhost``. A delta
that left ``host`` out keeps the name its stream was given before. The boot epoch and interval
stay unknown (null): a hub takes the boot epoch from the event id.

Constraints: pure; reads only what it rewrites and leaves every other value as it came, so
:class:`gpuflow.transport.wire.StreamReader` reads the result as any schema-4 frame. Imports
nothing of the transport (wire.py imports it).
"""

from __future__ import annotations

from typing import Any

from gpuflow.core.identity import UNNAMED_HOST, check_host_name

#: the items that carry their host's name
TAGGED_PARTS = ("devices", "processes", "traced", "traced_retired")
#: what a host entry adds to the host's own fields (a fleet of one: up, no hub's view of it)
OWN_ENTRY = {"state": "up", "seen": None, "restarts": 0, "address": None, "detail": None,
             "lag_ms": None}


def old_host_name(host: Any, fallback: str | None) -> str:
    """The name of an old agent's host: its hostname if that is a host name, else ``fallback``."""
    hostname = host.get("hostname") if isinstance(host, dict) else None
    try:
        return check_host_name(hostname)
    except ValueError:
        return fallback or UNNAMED_HOST


def upgrade_frame(frame: dict[str, Any], known: str | None,
                  fallback: str | None) -> tuple[dict[str, Any], str]:
    """``frame`` (schema 2) with its host named and its items tagged, and that name; ``known`` is
    the name given to the stream's frames before (None before the first)."""
    out = dict(frame)
    if "host" in frame:
        name = old_host_name(frame["host"], fallback)
        host = {**frame["host"], "name": name, "boot_epoch": None, "interval_s": None}
        host["problems"] = host.pop("problems", [])   # last, as in the plain form
        out["host"] = host
        out["hosts"] = [{**host, **OWN_ENTRY}]
    else:
        name = known if known is not None else old_host_name(None, fallback)
    for part in TAGGED_PARTS:
        if part in frame:
            out[part] = [{**item, "host": name} for item in frame[part]]
    return out, name
