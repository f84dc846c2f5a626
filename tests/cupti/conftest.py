"""Fixtures for the CUPTI collector tests: both decoder twins, the compiled test producer, rings.

Like multidict's tests/conftest.py: the session fixture ``decoder_impl`` is parametrized ``c`` /
``py``; the ``c`` case carries the ``c_extension`` mark (deselect with ``-m "not c_extension"``)
and is skipped when the extension is not built — unless it is required (GPUFLOW_REQUIRE_EXTENSIONS=1
or CI=true), where it fails instead.

Rings are written by tests/support/ringproducer.py, the producer compiled from the same C sources as
libgpuflow_inject.so, so the wire format and the handover are exercised byte for byte. Each test
gets its own session id and its own ring socket, in a private directory (what ``gpuflow run``
makes); a traced process is a courier (tests/support/ring_courier.c) that hands a test's ring over
from a pid of its own and exits or dies when the test says so. Everything a test creates is
closed afterwards.
"""

from __future__ import annotations

import itertools
import mmap
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from ringproducer import Courier, RingProducer, build_producer

from gpuflow.collectors.cupti import decoder as decoder_mod
from gpuflow.collectors.cupti.collector import CuptiCollector
from gpuflow.collectors.cupti.handover import RingSocket, plan_private_directory

#: the wall clock the collector tests' collectors read (ns since the epoch)
WALL0 = 1_764_000_000_000_000_000


def extensions_required() -> bool:
    return os.environ.get("GPUFLOW_REQUIRE_EXTENSIONS") == "1" or os.environ.get("CI") == "true"


@dataclass(frozen=True)
class DecoderImpl:
    """One decoder twin under test."""

    name: str
    cls: type
    is_compiled: bool


@pytest.fixture(scope="session", params=[pytest.param("c", marks=pytest.mark.c_extension, id="c"),
                                         pytest.param("py", id="py")])
def decoder_impl(request: pytest.FixtureRequest) -> DecoderImpl:
    if request.param == "py":
        return DecoderImpl("py", decoder_mod.RingDecoderPy, False)
    if decoder_mod.RingDecoderC is None:
        msg = f"the compiled decoder did not load: {decoder_mod.EXTENSION_IMPORT_ERROR}"
        if extensions_required():
            pytest.fail(msg)
        pytest.skip(msg)
    return DecoderImpl("c", decoder_mod.RingDecoderC, True)


@pytest.fixture(scope="session")
def both_impls() -> tuple[type, type]:
    """(compiled, Python) for the tests that compare the twins directly."""
    if decoder_mod.RingDecoderC is None:
        msg = f"the compiled decoder did not load: {decoder_mod.EXTENSION_IMPORT_ERROR}"
        if extensions_required():
            pytest.fail(msg)
        pytest.skip(msg)
    return decoder_mod.RingDecoderC, decoder_mod.RingDecoderPy


@pytest.fixture(scope="session")
def producer_lib(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_producer(tmp_path_factory.mktemp("producer"))


_pids = itertools.count(4_000_000)  # above pid_max's default: never a live process


def fake_pid() -> int:
    """A pid no process has (rings of tests that do not care about liveness)."""
    return next(_pids)


class Rings:
    """Creates rings (producer + mapping), couriers and a ring socket, and closes all of them
    afterwards. The socket goes to the collector the test makes (which closes it when it stops)."""

    def __init__(self, lib: str, session: str) -> None:
        self.lib = lib
        self.session = session
        self.socket = RingSocket.in_private_directory(plan_private_directory(os.environ))
        self._producers: list[RingProducer] = []
        self._couriers: list[Courier] = []
        self._maps: list[mmap.mmap] = []

    @property
    def socket_path(self) -> Path:
        return self.socket.path

    def producer(self, pid: int | None = None, capacity: int = 1024) -> RingProducer:
        p = RingProducer(self.lib, fake_pid() if pid is None else pid, capacity)
        self._producers.append(p)
        return p

    def courier(self, producer: RingProducer) -> Courier:
        """A traced process: a process of its own hands ``producer``'s ring over, and lives on."""
        c = Courier(self.lib, producer, self.socket_path)
        self._couriers.append(c)
        return c

    def traced(self, capacity: int = 1024) -> tuple[RingProducer, Courier]:
        """A ring, handed over by a courier whose pid its header names too."""
        p = self.producer(pid=os.getpid(), capacity=capacity)
        return p, self.courier(p)

    def gone(self, producer: RingProducer, status: int = 0) -> int:
        """Hand ``producer``'s ring over from a process that exits at once; its pid."""
        c = self.courier(producer)
        c.exit(status)
        return c.pid

    def mapping(self, producer: RingProducer) -> mmap.mmap:
        """The consumer's read-write mapping of a producer's ring."""
        mm = mmap.mmap(producer.fd, 0)
        self._maps.append(mm)
        return mm

    def cleanup(self) -> None:
        for mm in self._maps:
            try:
                mm.close()
            except BufferError:  # a decoder still holds it; the test's fault, but clean up anyway
                pass
        for c in self._couriers:
            if c.running():
                c.kill()
        for p in self._producers:
            p.close()
        self.socket.close()   # idempotent: a collector may have closed it


@pytest.fixture
def session_id() -> str:
    return "t" + secrets.token_hex(6)


@pytest.fixture
def rings(producer_lib: str, session_id: str) -> Iterator[Rings]:
    r = Rings(producer_lib, session_id)
    yield r
    r.cleanup()


def decode_all(decoder: Any) -> dict[str, Any]:
    """Everything a decoder reports, as plain data (for comparing twins and models)."""
    header = decoder.header()
    for volatile in ("started_wall_ns",):
        header.pop(volatile)
    return {
        "kernels": decoder.kernels(),
        "transfers": decoder.transfers(),
        "lanes": decoder.lanes(),
        "names": decoder.names(),
        "null_streams": decoder.null_streams(),
        "devices": decoder.devices(),
        "clock": decoder.clock(),
        "counters": decoder.counters(),
        "header": header,
        "tail": decoder.tail,
    }


MakeDecoder = Callable[..., Any]


def poll_until(collector, predicate, timeout=30.0):
    """Poll ``collector`` until ``predicate(part)`` holds; the part."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        collector.poll()
        if predicate(collector.part()):
            return collector.part()
        time.sleep(0.06)  # past the 50 ms build gap
    raise AssertionError(f"condition not met; last part {collector.part()}")


@pytest.fixture
def collector_factory(decoder_impl, rings):
    """Makes CuptiCollectors on this test's session (the chosen decoder twin, a fixed clock);
    stops them afterwards. Their kernel tables are brought up to date at every build unless a test
    asks for ``kernel_table_gap_s`` (the agent's cadence: test_kernel_table_cadence.py), so that a
    test may compare a snapshot's kernel counts with its records."""
    made: list[CuptiCollector] = []

    def make(**kw) -> CuptiCollector:
        notes = kw.pop("notes", None)
        kw.setdefault("kernel_table_gap_s", 0.0)
        c = CuptiCollector(rings.session, rings.socket,
                           (lambda: notes.append(1)) if notes is not None else (lambda: None),
                           decoder_class=decoder_impl.cls, clock_ns=lambda: WALL0 + 50_000_000, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()
