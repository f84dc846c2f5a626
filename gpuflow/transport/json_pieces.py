"""Compact JSON encoded in pieces, so that no single encoder call holds the GIL for long.

What it is for: the agent's JSON bodies (/api/snapshot, the stream's frames, the recorder's
answers) are made by one process whose threads share the GIL with the server's, and
``json.dumps`` holds the GIL from its first byte to its last. A snapshot bounded at ~5 MB took
~50 ms to encode on the development VM, so while it was encoded a /healthz or the page waited as
long (the hostile-ring bench measured /healthz at up to 67 ms against its 50 ms bound on the H200
host). :func:`encode` gives exactly the text ``json.dumps(obj, separators=(",", ":"),
ensure_ascii=False)`` would, but made of calls on at most :data:`PIECE_ITEMS` list items or one
container's scalars at a time; between them the interpreter can hand the GIL to another thread.

Constraints: byte-identical to one ``json.dumps`` call (tests/transport/test_json_pieces.py
compares them on generated documents); non-finite floats raise ``ValueError`` as
``allow_nan=False`` does (frames.dumps turns them into null); only what ``json`` accepts is
accepted. Documents are the agent's own (dicts, lists, str, numbers, bool, None), so recursion
depth is small.
"""

from __future__ import annotations

import json
from typing import Any

#: list items encoded by one call, when they hold no containers of their own
PIECE_ITEMS = 256

_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_CONTAINERS = (dict, list, tuple)


def encode(obj: Any) -> str:
    """``obj`` as compact JSON text, encoded in pieces (see the module's opening)."""
    out: list[str] = []
    _into(obj, out)
    return "".join(out)


def _nested(value: Any) -> bool:
    """Whether ``value`` is a container holding a container (so it is split further)."""
    if isinstance(value, dict):
        return any(isinstance(v, _CONTAINERS) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, _CONTAINERS) for v in value)
    return False


def _into(obj: Any, out: list[str]) -> None:
    if isinstance(obj, dict):
        if not _nested(obj):
            out.append(_ENCODE(obj))
            return
        out.append("{")
        for i, (key, value) in enumerate(obj.items()):
            if i:
                out.append(",")
            out.append(_ENCODE({key: 0})[1:-1][:-1])   # '"key":', as json writes any key kind
            _into(value, out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        if len(obj) <= PIECE_ITEMS and not _nested(obj):
            out.append(_ENCODE(obj))
            return
        out.append("[")
        for start in range(0, len(obj), PIECE_ITEMS):
            if start:
                out.append(",")
            chunk = obj[start:start + PIECE_ITEMS]
            if any(_nested(v) for v in chunk):
                for i, value in enumerate(chunk):
                    if i:
                        out.append(",")
                    _into(value, out)
            else:
                out.append(_ENCODE(list(chunk))[1:-1])
        out.append("]")
    else:
        out.append(_ENCODE(obj))
