"""Text from a snapshot, made safe to print on a terminal.

Kernel names, process names, CUPTI details, device names and problem messages come from traced
programs, drivers and plugins, none of which the terminal should obey: an ESC sequence there
could retitle the terminal, clear it, move the cursor over earlier lines or, on some terminals,
make it answer back. :func:`printable` writes every character a terminal acts on as a visible
escape, the way Python writes it (``\\x1b``, ``\\r``, ``\\u202e``): the C0 controls (tab and
newline included: one field stays on one line), DEL, the C1 controls (``\\x9b`` is an 8-bit
CSI), the line and paragraph separators, Unicode's bidirectional overrides and isolates (which
reorder what follows them), and lone surrogates (what undecodable bytes become under
``surrogateescape``, and which a UTF-8 stream cannot even encode). Everything else, non-ASCII
names included, is kept as it is.

Constraints: pure; a regular expression over the text, so the cost is one pass.
"""

from __future__ import annotations

import re

_ACTIVE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    if c in _NAMED:
        return _NAMED[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on written as an escape."""
    return _ACTIVE.sub(_escape, text)
