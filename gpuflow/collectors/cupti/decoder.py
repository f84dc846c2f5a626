"""Picks the ring decoder: the compiled ``_decoder_c`` when it loads, else the Python twin.

``GPUFLOW_NO_EXTENSIONS=1`` (any non-empty value) forces the pure-Python twin, as does a
non-CPython interpreter; type checkers are pointed at the Python twin. Both classes stay
importable under their own names (``RingDecoderPy`` always, ``RingDecoderC`` when built) so the
tests can run every case through both; ``USING_EXTENSION`` says which one ``RingDecoder`` is.

Both satisfy :class:`gpuflow.collectors.cupti.protocol.RingDecoder`, the type their callers use.
Each twin has its own ``Retention`` (the flight recorder's shared budget, docs/recorder.md), picked
alike: ``Retention`` goes with ``RingDecoder``, ``RetentionPy`` / ``RetentionC`` with their twins.

Constraints: importing this module must never fail because the extension is missing or broken.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from gpuflow.collectors.cupti._decoder_py import RingDecoder as RingDecoderPy
from gpuflow.collectors.cupti._retain_py import Retention as RetentionPy
from gpuflow.collectors.cupti.protocol import RingDecoder as RingDecoderProtocol

NO_EXTENSIONS = bool(os.environ.get("GPUFLOW_NO_EXTENSIONS"))
if sys.implementation.name != "cpython":
    NO_EXTENSIONS = True

RingDecoderC: type[RingDecoderProtocol] | None
RetentionC: Any
try:
    from gpuflow.collectors.cupti._decoder_c import RingDecoder as RingDecoderC
    from gpuflow.collectors.cupti._decoder_c import Retention as RetentionC
except ImportError as exc:  # pragma: no cover - depends on the build
    RingDecoderC = RetentionC = None
    EXTENSION_IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    EXTENSION_IMPORT_ERROR = None

if TYPE_CHECKING or NO_EXTENSIONS or RingDecoderC is None:
    RingDecoder = RingDecoderPy
    Retention: Any = RetentionPy
    USING_EXTENSION = False
else:
    RingDecoder = RingDecoderC
    Retention = RetentionC
    USING_EXTENSION = True

__all__ = ["RingDecoder", "RingDecoderPy", "RingDecoderC", "Retention", "RetentionPy", "RetentionC",
           "USING_EXTENSION", "NO_EXTENSIONS",
           "EXTENSION_IMPORT_ERROR"]
