"""Where the PM sampler helper is, and which libcupti it should load.

The helper is built by setup.py beside this module (``gpuflow-pm-sampler``); the libcupti is the
one ``GPUFLOW_CUPTI_PATH`` names (the variable the injected library reads too), else the first of
the CUDA toolkit's and the nvidia-cuda-cupti wheel's copies that exists, else none (the helper then
asks the dynamic loader for the sonames).

Constraints: looks at files only; loads nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

HELPER_NAME = "gpuflow-pm-sampler"
CUPTI_SONAMES = ("libcupti.so.13", "libcupti.so.12")


def helper_path(given: str | None = None) -> Path | None:
    """The helper to run: ``given``, else the built one; None when it is not there."""
    path = Path(given) if given else Path(__file__).with_name(HELPER_NAME)
    return path if path.is_file() and os.access(path, os.X_OK) else None


def cupti_library(environ: Mapping[str, str]) -> str | None:
    if environ.get("GPUFLOW_CUPTI_PATH"):
        return environ["GPUFLOW_CUPTI_PATH"]
    roots = [Path(environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if environ.get(v)]
    roots += [Path("/usr/local/cuda"), Path("/opt/cuda")]
    dirs = [r / sub for r in roots for sub in ("targets/x86_64-linux/lib", "targets/sbsa-linux/lib",
                                               "extras/CUPTI/lib64", "lib64")]
    try:
        import nvidia  # type: ignore[import-not-found]

        dirs += [Path(root) / sub for root in nvidia.__path__ for sub in ("cu13/lib", "cuda_cupti/lib")]
    except ImportError:
        pass
    for d in dirs:
        for name in CUPTI_SONAMES:
            if (d / name).is_file():
                return str(d / name)
    return None
