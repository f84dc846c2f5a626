"""What a plugin tells ``gpuflow doctor``: one :class:`DoctorCheck` per thing that works or not.

Constraints: plain data; the command line prints the checks and decides its exit status from
their ``needed_for`` (docs/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass

#: What a failed check stops: ``watch`` (the agent cannot start), ``gpus`` (it starts but shows
#: no GPU), ``run`` (programs cannot be traced), ``speed`` (works, but slower: a warning).
NEEDED_FOR = ("watch", "gpus", "run", "speed")


@dataclass(frozen=True)
class DoctorCheck:
    """One line of ``gpuflow doctor``: ``[ ok ] name  detail``, or FAIL/warn with what to do."""

    name: str  #: what was checked, short ("NVML", "libcupti")
    ok: bool
    detail: str  #: what was found, or why it failed and what to do about it
    needed_for: str  #: one of NEEDED_FOR

    def __post_init__(self) -> None:
        if self.needed_for not in NEEDED_FOR:
            raise ValueError(f"needed_for must be one of {NEEDED_FOR}, got {self.needed_for!r}")
