"""GPUFLOW_AB_PERIOD_MS in the agent: parsed as the injected library parses it, and the NVML
collector (both its threads, against the scripted fake backend) beginning no poll or sweep in an
off period — so bench/cost/overhead_ab.py's on-vs-off figure includes NVML polling's cost."""

from __future__ import annotations

import threading
import time

import pytest

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.testing.ab_period import ab_period_ms, seconds_until_on
from gpuflow.core.context import AgentConfig

MS = 1_000_000


@pytest.mark.parametrize("text, period", [
    (None, 0), ("", 0), ("0", 0), ("abc", 0), ("-5", 0), ("10ms", 0), (" 50", 0),
    ("3", 10), ("250", 250), ("99999", 60000)])
def test_parsed_as_the_injected_library_parses_it(text, period):
    # the same cases as tests/inject/test_inject_library.py's for the C side
    assert ab_period_ms({} if text is None else {"GPUFLOW_AB_PERIOD_MS": text}) == period


def test_seconds_until_the_next_on_period():
    assert seconds_until_on(0, 123 * MS) == 0
    assert seconds_until_on(100, 50 * MS) == 0            # period 0: on
    assert seconds_until_on(100, 130 * MS) == pytest.approx(0.070)   # period 1: off, 70 ms left
    assert seconds_until_on(100, 199 * MS) == pytest.approx(0.001)
    assert seconds_until_on(100, 200 * MS) == 0           # period 2: on


class TimedBackend(FakeBackend):
    """The fake backend, noting when each NVML call was made."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.times: list[int] = []
        self.lock = threading.Lock()

    def _enter(self, method, handle=None):
        with self.lock:
            self.times.append(time.monotonic_ns())
        return super()._enter(method, handle)


def call_times(monkeypatch, period: str | None) -> tuple[list[int], list[int]]:
    """(when each NVML call was made, when each poll or sweep began) over 1.2 s of polling."""
    if period is None:
        monkeypatch.delenv("GPUFLOW_AB_PERIOD_MS", raising=False)
    else:
        monkeypatch.setenv("GPUFLOW_AB_PERIOD_MS", period)
    backend = TimedBackend("shared8")
    c = NvmlCollector(backend, AgentConfig(interval_s=0.02), proc_reader=backend.proc_reader,
                      notify=lambda: None)
    starts: list[int] = []

    def noting_start(work):
        def begin():
            with backend.lock:
                starts.append(time.monotonic_ns())
            return work()
        return begin

    c.poll_once = noting_start(c.poll_once)      # the threads look these up on the instance
    c.sample_once = noting_start(c.sample_once)
    c.start()
    time.sleep(1.2)
    c.stop()
    with backend.lock:
        return list(backend.times), list(starts)


def test_no_nvml_poll_or_sweep_begins_in_an_off_period(monkeypatch):
    times, starts = call_times(monkeypatch, "100")
    period = 100 * MS
    on = {t // period for t in times if (t // period) % 2 == 0}
    # the gate is checked before each poll and sweep; one begun at the very end of an on period
    # finishes past it (its calls then land in the off period, later still on a loaded machine:
    # CI saw one 30 ms in), but none may begin there
    late = [t % period for t in starts if (t // period) % 2 and t % period > 15 * MS]
    assert len(on) >= 4 and len(starts) >= 8 and not late, f"{len(late)} polls began inside off periods"


def test_without_the_switch_nvml_is_polled_throughout(monkeypatch):
    times, starts = call_times(monkeypatch, None)
    period = 100 * MS
    assert len([t for t in times if (t // period) % 2 and t % period > 15 * MS]) > 10
    assert len([t for t in starts if (t // period) % 2 and t % period > 15 * MS]) > 5
