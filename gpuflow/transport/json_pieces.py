"""Compact JSON encoded in pieces, so that no single encoder call holds the GIL for long.

Since orjson writes the agent's JSON (``frames.dumps``: a 4.3 MB document in ~4 ms, where this
module takes ~27), this is the way for what orjson does not take (ints beyond 64 bits, keys that
are not text, subclasses), with json's own answer for it.

What it is for: the agent's JSON bodies (/api/snapshot, the stream's frames, the recorder's
answers) are made by one process whose threads share the GIL with the server's, and
``json.dumps`` holds the GIL from its first byte to its last. A snapshot bounded at ~5 MB took
~50 ms to encode on the development VM, so while it was encoded a /healthz or the page waited as
long (the hostile-ring bench measured /healthz at up to 67 ms against its 50 ms bound on the H200
host). :func:`encode` gives exactly the text ``json.dumps(obj, separators=(",", ":"),
ensure_ascii=False)`` would, but made of calls each on at most :data:`PIECE_ITEMS` items of a long
list, or on a part that holds no further container; between them the interpreter can hand the
GIL to another thread. The split follows the shape, not the content, so it costs next to nothing
(a 4 MB snapshot of 4,000 kernels: no slower than one call on the development VM).

Constraints: byte-identical to one ``json.dumps`` call (tests/transport/test_json_pieces.py
compares them on generated documents); non-finite floats raise ``ValueError`` as
``allow_nan=False`` does (frames.dumps turns them into null); only what ``json`` accepts is
accepted. Documents are the agent's own (dicts, lists, str, numbers, bool, None), so recursion
depth is small.
"""

from __future__ import annotations

import json
from typing import Any

#: the items of a long list encoded by one call, whatever they hold
PIECE_ITEMS = 256

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_CONTAINERS = (dict, list, tuple)
#: exact types that are never containers (a subclass of one is checked item by item)
_SCALARS = frozenset((str, int, float, bool, type(None)))


def encode(obj: Any) -> str:
    """``obj`` as compact JSON text, encoded in pieces (see the module's opening)."""
    out: list[str] = []
    _into(obj, out)
    return "".join(out)


def _into(obj: Any, out: list[str]) -> None:
    """Append ``obj``'s text in pieces. A list of more than PIECE_ITEMS items goes PIECE_ITEMS
    items a call, each run encoded whole (many items are small ones: a snapshot's kernels, a
    lane's spans); a shorter list, or a dict, is split only where it holds containers (a
    snapshot's few processes, a process's parts), each run of its items or members that hold
    none (scalars, empty or scalar-only containers) encoded in one call (a device's two dozen
    readings: one call, not one each)."""
    if isinstance(obj, (list, tuple)):
        if len(obj) > PIECE_ITEMS:
            out.append("[")
            for start in range(0, len(obj), PIECE_ITEMS):
                if start:
                    out.append(",")
                out.append(_ENCODE(list(obj[start:start + PIECE_ITEMS]))[1:-1])
            out.append("]")
        elif any(_holds_containers(v) for v in obj):
            out.append("[")
            run: list[Any] = []   # items that hold no container, encoded together
            for value in obj:
                if _holds_containers(value):
                    _flush(_ENCODE(run)[1:-1] if run else "", out)
                    run = []
                    if out[-1] != "[":
                        out.append(",")
                    _into(value, out)
                else:
                    run.append(value)
            _flush(_ENCODE(run)[1:-1] if run else "", out)
            out.append("]")
        else:
            out.append(_ENCODE(obj))
    elif isinstance(obj, dict) and any(_holds_containers(v) for v in obj.values()):
        out.append("{")
        members: dict[Any, Any] = {}   # members that hold no container, encoded together
        for key, value in obj.items():
            if _holds_containers(value):
                _flush(_ENCODE(members)[1:-1] if members else "", out)
                members = {}
                _flush(_ENCODE({key: 0})[1:-2], out)   # '"key":', as json writes any kind of key
                _into(value, out)
            else:
                members[key] = value
        _flush(_ENCODE(members)[1:-1] if members else "", out)
        out.append("}")
    else:
        out.append(_ENCODE(obj))


def _flush(text: str, out: list[str]) -> None:
    """Append ``text`` (members or items, or a key), after a comma unless it is the first of its
    container (``out`` then ends with that container's opening bracket: no other piece is one);
    nothing for no text."""
    if text:
        out.append(text if out[-1] in ("{", "[") else "," + text)


def _holds_containers(value: Any) -> bool:
    """Whether ``value`` is a container with a non-empty container in it, or a list longer than
    PIECE_ITEMS (so it is split).
    A container whose items are all of :data:`_SCALARS` holds none: that is asked first, in one
    C-level pass (a frame's span rows are thousands of such lists)."""
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        if len(value) > PIECE_ITEMS:
            return True
        items = value
    else:
        return False
    return not _SCALARS.issuperset(map(type, items)) and any(isinstance(v, _CONTAINERS) and v for v in items)
