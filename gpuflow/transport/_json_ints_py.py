"""Pure-Python twin of ``_json_ints_c``: a column of 64-bit integers as a compact JSON array.

What it is for: the readable statement of what the compiled writer does, and the writer where the
extension is not built. ``str`` of a Python int is its JSON text, so joining them is what
``json.dumps`` writes for the list, without building the list (about half of its time).

Constraints: byte-identical to ``_json_ints_c`` and to ``json.dumps(list(values),
separators=(",", ":")).encode()`` (tests/transport/test_json_ints.py compares them).
"""

from __future__ import annotations

from array import array

is_compiled = False


def int64_json(values: array) -> bytes:
    """``values`` (an ``array('q')``) as a compact JSON array of integers, ASCII bytes."""
    return ("[" + ",".join(map(str, values)) + "]").encode("ascii")
