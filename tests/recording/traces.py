"""Traces for the recording tests: a fake recorder's content written by GPUFlow's own exporter.

:func:`recorded` steps the fake collector's scenario (gpuflow.testing.fake_collector) on a clock of
its own, so its recorder (gpuflow.testing.fake_recorder) holds a known content: traced processes
on several GPUs with kernels, copies and memsets, and every GPU's and process's readings. The
trace is what ``gpuflow export`` would write of it (gpuflow.export.window_export, in pieces), the
GPUs described as the agent showed them at the last tick.

Constraints: deterministic given its arguments; no agent, no server, no clock but its own.
"""

from __future__ import annotations

from gpuflow.export.window_export import WindowExport
from gpuflow.testing import fake_collector as fc
from gpuflow.testing.fake_recorder import FakeRecorder

#: the scenario's first tick (seconds since the epoch), in the past like any recording
T0 = 1_764_000_000.0


class Recorded:
    """A fake recorder stepped ``ticks`` times at ``rate_hz``, and the range it covers."""

    def __init__(self, ticks: int = 40, rate_hz: float = 4.0, **scenario: int) -> None:
        options = {"rate_hz": rate_hz, "gpus": 2, "procs": 3, "traced": 2, "lanes": 4, "spans": 25, **scenario}
        self.recorder = FakeRecorder("fake", retain_s=10 ** 6, retain_spans=10 ** 8, resolution_s=1.0 / rate_hz)
        scenario_ = fc.FakeScenario(fc.FakeOptions(**options), show_cmdline=False, recorder=self.recorder)
        self.parts = [scenario_.step(T0 + k / rate_hz) for k in range(ticks)]
        self.start_s, self.end_s = T0 - 5.0, T0 + ticks / rate_hz + 5.0

    def window(self, start_s: float, end_s: float, pid: int | None = None, width_px: int | None = None):
        return (self.recorder.window(start_s, end_s, pid, width_px),)

    def history(self, start_s: float, end_s: float):
        return (self.recorder.history(start_s, end_s),)

    def trace(self, piece_spans: int | None = None, described: bool = True) -> bytes:
        """The trace an agent showing the last tick's GPUs writes (``described=False``: as GPUFlow
        wrote traces before it described the GPUs)."""
        out: list[bytes] = []
        devices = self.parts[-1].devices if described else ()
        WindowExport(self.window, self.history, self.start_s, self.end_s, piece_spans=piece_spans,
                     devices=devices).write(out.append)
        return b"".join(out)
