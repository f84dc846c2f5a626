"""Picks the integer-column JSON writer: the compiled ``_json_ints_c`` when it loads, else its twin.

As the ring decoder and the slice encoder are picked: ``GPUFLOW_NO_EXTENSIONS=1`` (any non-empty
value) forces the pure-Python twin, as does a non-CPython interpreter. Both twins stay importable
under their own names (``json_ints_py`` always, ``json_ints_c`` when built) so the tests compare
them; ``USING_EXTENSION`` says which one :func:`int64_json` is.

Constraints: importing this module never fails because the extension is missing or broken.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from gpuflow.transport import _json_ints_py as json_ints_py

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"

json_ints_c: ModuleType | None
try:
    from gpuflow.transport import _json_ints_c as json_ints_c  # type: ignore[attr-defined, no-redef]
except ImportError:  # pragma: no cover - depends on the build
    json_ints_c = None

if TYPE_CHECKING or NO_EXTENSIONS or json_ints_c is None:
    from gpuflow.transport._json_ints_py import int64_json
    USING_EXTENSION = False
else:
    int64_json = json_ints_c.int64_json
    USING_EXTENSION = True

__all__ = ["int64_json", "json_ints_py", "json_ints_c", "USING_EXTENSION", "NO_EXTENSIONS"]
