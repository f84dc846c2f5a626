"""Picks the writers of the stream's text: span rows, kernel entries and traced processes' heads
(the compiled ``_wire_text_c`` when it loads, else its twin ``_wire_text_py``) and a delta's lanes
(``_lane_text_c``, else ``_lane_text_py``); what each writes is its module's opening.

As the ring decoder and the column writer are picked: ``GPUFLOW_NO_EXTENSIONS=1`` (any non-empty
value) forces the pure-Python twins, as does a non-CPython interpreter. The twins stay importable
under their own names (``wire_text_py`` and ``lane_text_py`` always, ``wire_text_c`` and
``lane_text_c`` when built) so the tests compare them; ``USING_EXTENSION`` says which ones
:func:`span_rows`, :func:`name_ids`, :func:`kernel_delta`, :func:`head_text`, :func:`lane_news`
and :func:`lane_texts` are.

Constraints: importing this module never fails because the extension is missing or broken.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from gpuflow.transport import _lane_text_py as lane_text_py
from gpuflow.transport import _wire_text_py as wire_text_py

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"

wire_text_c: ModuleType | None
lane_text_c: ModuleType | None
try:
    from gpuflow.transport import _wire_text_c as wire_text_c  # type: ignore[attr-defined, no-redef]
    from gpuflow.transport import _lane_text_c as lane_text_c  # type: ignore[attr-defined, no-redef]
except ImportError:  # pragma: no cover - depends on the build
    wire_text_c = lane_text_c = None

if TYPE_CHECKING or NO_EXTENSIONS or wire_text_c is None:
    from gpuflow.transport._lane_text_py import lane_news, lane_texts
    from gpuflow.transport._wire_text_py import head_text, kernel_delta, name_ids, span_rows
    USING_EXTENSION = False
else:
    span_rows = wire_text_c.span_rows
    kernel_delta = wire_text_c.kernel_delta
    name_ids = wire_text_c.name_ids
    head_text = wire_text_c.head_text
    lane_news = lane_text_c.lane_news
    lane_texts = lane_text_c.lane_texts
    USING_EXTENSION = True

__all__ = ["span_rows", "kernel_delta", "name_ids", "head_text", "lane_news", "lane_texts", "wire_text_py", "wire_text_c", "lane_text_py", "lane_text_c", "USING_EXTENSION",
           "NO_EXTENSIONS"]
