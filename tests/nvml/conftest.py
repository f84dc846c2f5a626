"""Shared helpers for the NVML collector tests: a collector over a fake scenario, driven by hand."""

from __future__ import annotations

import pytest

from gpuflow.collectors.nvml.collector import NvmlCollector
from gpuflow.collectors.nvml.fake_backend import FakeBackend
from gpuflow.collectors.nvml.query import reset_log_once
from gpuflow.core.context import AgentConfig
from gpuflow.core.snapshot import SnapshotPart


class Manual:
    """A collector whose polls the test makes itself (no threads), with its fake backend."""

    def __init__(self, scenario: str, seed: int = 0, **config) -> None:
        self.backend = FakeBackend(scenario, seed=seed)
        self.notified = 0
        self.collector = NvmlCollector(
            self.backend, AgentConfig(**config), proc_reader=self.backend.proc_reader,
            notify=self._notify, hostname="testhost",
        )

    def _notify(self) -> None:
        self.notified += 1

    def tick(self) -> SnapshotPart:
        """What one interval of the two threads does: a sampler sweep, then a poll.

        The very first call polls once before (that poll initializes NVML), as the poll thread
        does before it starts the sampler."""
        if self.collector.polls == 0:
            self.collector.poll_once()
        self.collector.sample_once()
        return self.collector.poll_once()


@pytest.fixture
def manual():
    reset_log_once()
    return Manual


def by_pid(part: SnapshotPart) -> dict:
    return {p.pid: p for p in part.processes}
