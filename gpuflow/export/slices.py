"""Picks the slice encoder: the compiled ``_slices_c`` when it loads, else the Python twin.

As the ring decoder is picked (gpuflow.collectors.cupti.decoder): ``GPUFLOW_NO_EXTENSIONS=1``
(any non-empty value) forces the pure-Python twin, as does a non-CPython interpreter; type
checkers see the Python twin. Both twins stay importable under their own names (``slices_py``
always, ``slices_c`` when built) so the tests compare them; ``USING_EXTENSION`` says which one
``LaneSlices`` / ``encode_spans`` / ``finish`` come from.

Constraints: importing this module never fails because the extension is missing or broken.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from gpuflow.export import _slices_py as slices_py

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"

slices_c: ModuleType | None
try:
    from gpuflow.export import _slices_c as slices_c  # type: ignore[attr-defined, no-redef]
except ImportError as exc:  # pragma: no cover - depends on the build
    slices_c = None
    EXTENSION_IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    EXTENSION_IMPORT_ERROR = None

if TYPE_CHECKING or NO_EXTENSIONS or slices_c is None:
    from gpuflow.export._slices_py import LaneSlices, encode_spans, finish
    USING_EXTENSION = False
else:
    LaneSlices, encode_spans, finish = slices_c.LaneSlices, slices_c.encode_spans, slices_c.finish
    USING_EXTENSION = True

__all__ = ["LaneSlices", "encode_spans", "finish", "slices_py", "slices_c", "USING_EXTENSION",
           "NO_EXTENSIONS", "EXTENSION_IMPORT_ERROR"]
