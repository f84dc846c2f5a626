"""Picks the kernel table helper of the snapshot builder: the compiled ``_kernel_table_c`` when it
loads, else its twin ``_kernel_table_py`` (what both do: that module's opening).

As the ring decoder is picked: ``GPUFLOW_NO_EXTENSIONS=1`` (any non-empty value) forces the
pure-Python twin, as does a non-CPython interpreter. Both twins stay importable under their own
names (``kernel_table_py`` always, ``kernel_table_c`` when built) so the tests compare them;
``USING_EXTENSION`` says which one :func:`refresh`, :func:`ordered` and :func:`sort_key` are.

Constraints: importing this module never fails because the extension is missing or broken.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from gpuflow.collectors.cupti import _kernel_table_py as kernel_table_py

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS")) or sys.implementation.name != "cpython"

kernel_table_c: ModuleType | None
try:
    from gpuflow.collectors.cupti import _kernel_table_c as kernel_table_c  # type: ignore[attr-defined, no-redef]
except ImportError:  # pragma: no cover - depends on the build
    kernel_table_c = None

if TYPE_CHECKING or NO_EXTENSIONS or kernel_table_c is None:
    from gpuflow.collectors.cupti._kernel_table_py import ordered, refresh, sort_key
    USING_EXTENSION = False
else:
    refresh = kernel_table_c.refresh
    sort_key = kernel_table_c.sort_key
    ordered = kernel_table_c.ordered
    USING_EXTENSION = True

__all__ = ["refresh", "ordered", "sort_key", "kernel_table_py", "kernel_table_c", "USING_EXTENSION", "NO_EXTENSIONS"]
