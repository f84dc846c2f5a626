"""GPUFlow: a live, browser-based view of what every process is doing on a machine's NVIDIA GPUs.

Public names: ``hookimpl`` (mark collector hook implementations) and ``__version__``. Everything
else is reached through its module (``gpuflow.core.snapshot`` for the data types).
"""

from gpuflow.core.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["hookimpl", "__version__"]
