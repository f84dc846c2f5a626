"""Exceptions of the ring decoder and the CUPTI collector: plain Python, shared by both twins.

Kept out of the Cython module (as httptools keeps ``errors.py`` apart from ``parser.pyx``) so the
compiled decoder, the pure-Python twin and the collector raise and catch the very same classes.
"""

from __future__ import annotations


class RingError(Exception):
    """Base class of everything the ring layer raises."""


class RingFormatError(RingError):
    """The ring's header is not one this decoder can read: bad magic, unknown version, wrong
    record size, impossible capacity, a mapping too small for its capacity, or torn counters
    (``head < tail`` or ``head - tail > capacity``). The message says which and what was found.

    Bad *records* never raise: they are counted (``invalid_records``) and the session is marked.
    """


class RingNotReady(RingFormatError):
    """The ring exists but its producer has not finished creating it (the magic, written last,
    is still 0, or the segment has not been sized yet). Try again on the next discovery pass."""


class RingDetached(RingError):
    """The decoder's mapping was released (:meth:`RingDecoder.detach`); it can no longer drain."""
