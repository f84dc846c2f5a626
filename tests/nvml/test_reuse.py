"""The tick's object reuse: a Device, Attachment or Process whose readings did not change is the
same object as last tick's, and reuse never changes what a part says (it equals a part built
from scratch, tick after tick, in every scenario)."""

from __future__ import annotations

import pytest

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend, scenario_names
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig

from .conftest import by_pid


class Clocked:
    """A collector over a fake scenario with clocks the test moves (1 s per tick: a GPM pair every
    tick, and every tick takes no time, so the parts' own poll durations agree)."""

    def __init__(self, scenario: str, forgetful: bool = False) -> None:
        self.now = 1_000.0
        self.backend = FakeBackend(scenario, seed=5, clock=lambda: self.now)
        self.backend.slow = {}
        self.collector = NvmlCollector(self.backend, AgentConfig(interval_s=1.0),
                                       proc_reader=self.backend.proc_reader,
                                       clock=lambda: self.now, monotonic=lambda: self.now,
                                       hostname="h")
        self.forgetful = forgetful

    def tick(self):
        c = self.collector
        if self.forgetful:  # drop everything a tick could reuse: every object is built anew
            c.forget_built()
        if c.polls == 0:
            c.poll_once()
        c.sample_once()
        self.now += 1.0
        return c.poll_once()


@pytest.mark.parametrize("scenario", scenario_names())
def test_reuse_never_changes_the_part(scenario):
    reset_log_once()
    reusing, fresh = Clocked(scenario), Clocked(scenario, forgetful=True)
    for _ in range(8):
        a, b = reusing.tick(), fresh.tick()
        assert a == b
        assert a.devices == b.devices and a.processes == b.processes  # spelled out for the diff


def still_gpu7(m: Clocked) -> None:
    """GPU 7 (MIG, no processes, no load) answers the same every tick once its energy counter is
    held still (a real one grows every tick, so a real GPU's Device is new every tick) and its
    GPM instances have their first pair (the second tick)."""
    counter = m.backend.energy
    m.backend.energy = lambda h: 3_600_000_000 if h.index == 7 else counter(h)
    m.tick()


def test_unchanged_readings_are_the_same_objects():
    m = Clocked("shared8")
    still_gpu7(m)
    first = m.tick()
    second = m.tick()
    # GPU 7 answers the same every tick (still_gpu7); GPU 0 runs a job
    assert second.devices[7] is first.devices[7]
    assert second.devices[0] is not first.devices[0]
    assert second.devices[0].utilization_gpu_pct is not None
    # the idle notebook (pid 6100) holds the same memory and has no SM sample: same object
    notebook = by_pid(second)[6100]
    assert notebook is by_pid(first)[6100]
    assert notebook.attachments[0].memory_used_bytes == 1 << 30
    # the training job's memory follows its load: a new process object with new attachments
    assert by_pid(second)[4242] is not by_pid(first)[4242]


def test_a_changed_reading_makes_a_new_device_with_it():
    m = Clocked("shared8")
    still_gpu7(m)
    first = m.tick()
    m.backend.temperature = lambda h: 99 if h.index == 7 else 40
    second = m.tick()
    assert second.devices[7] is not first.devices[7]
    assert second.devices[7].temperature_c == 99
    assert second.devices[7].power_draw_w == first.devices[7].power_draw_w
    del m.backend.temperature  # back to the fake's own answer
    third = m.tick()
    assert third.devices[7] == first.devices[7] and third.devices[7] is not second.devices[7]
