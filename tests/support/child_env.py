"""The environment of a Python child process a test starts, when the child imports tests/support.

pytest's ``pythonpath`` setting (pyproject.toml) puts this folder on the test process's import
path; a child started as ``sys.executable -c CODE`` gets the same through PYTHONPATH, set here
and nowhere else.

Constraints: standard library only; the caller's other environment variables pass unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

SUPPORT_DIR = Path(__file__).resolve().parent


def support_pythonpath(current: str | None = None) -> str:
    """PYTHONPATH with tests/support first, then ``current`` (default: this process's)."""
    rest = os.environ.get("PYTHONPATH", "") if current is None else current
    return os.pathsep.join(p for p in (str(SUPPORT_DIR), rest) if p)


def with_support(env: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default: this process's environment), PYTHONPATH reaching tests/support."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = support_pythonpath(out.get("PYTHONPATH", ""))
    return out
