"""Rings in the shared-memory directory: names, liveness, exclusive mapping, stale-ring sweeping."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from gpuflow.collectors.cupti import rings as R
from gpuflow.collectors.cupti.errors import RingFormatError, RingNotReady

from .conftest import fake_pid


@pytest.mark.parametrize(("filename", "parsed"), [
    ("gpuflow-9f2c4e1a-4242", ("9f2c4e1a", 4242)),
    ("gpuflow-my-session_1-17", ("my-session_1", 17)),
    ("gpuflow-abc-", None), ("gpuflow--12", None), ("gpuflow-abc-12x", None), ("other-abc-12", None),
    ("gpuflow-" + "a" * 32 + "-1", None), ("gpuflow-a.b-1", None),
])
def test_ring_names(filename, parsed):
    assert R.parse_ring_name(filename) == parsed


def test_ring_path_matches_the_producer(rings):
    p = rings.producer(pid=4242)
    assert R.ring_path(rings.session, 4242) == R.SHM_DIR / p.name.lstrip("/")
    assert R.ring_path(rings.session, 4242).exists()


def test_list_rings_of_a_session(rings, tmp_path):
    a, b = rings.producer(pid=fake_pid()), rings.producer(pid=fake_pid())
    other = rings.producer(session=rings.session + "x")
    found = R.list_rings(session=rings.session)
    assert [(r.session, r.pid) for r in found] == [(rings.session, a.pid), (rings.session, b.pid)]
    assert any(r.pid == other.pid for r in R.list_rings())
    (tmp_path / "unrelated").write_text("x")
    assert R.list_rings(tmp_path) == []
    assert R.list_rings(tmp_path / "missing") == []


def test_pid_alive_treats_zombies_as_gone():
    assert R.pid_alive(os.getpid())
    assert not R.pid_alive(fake_pid()) and not R.pid_alive(0)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while R.pid_alive(child.pid) and time.monotonic() < deadline:  # exits, stays a zombie until waited
        time.sleep(0.01)
    assert not R.pid_alive(child.pid)
    assert child.poll() is not None  # it was indeed a zombie, reaped only now
    assert not R.pid_alive(child.pid)


def test_process_name():
    with open(f"/proc/{os.getpid()}/comm") as f:
        assert R.process_name(os.getpid()) == f.read().strip()
    assert R.process_name(fake_pid()) is None


def test_a_mapped_ring_has_one_consumer(rings):
    p = rings.producer()
    path = R.ring_path(rings.session, p.pid)
    first = R.MappedRing(path)
    assert first.info.capacity == 1024 and first.info.producer_pid == p.pid
    with pytest.raises(R.RingBusy):
        R.MappedRing(path)
    first.close()
    second = R.MappedRing(path)  # the lock went with the first consumer
    second.unlink()
    assert not path.exists()
    second.close()
    second.unlink()  # already gone: fine


def test_mapping_reports_not_ready_and_bad_rings(tmp_path):
    empty = tmp_path / "gpuflow-s-1"
    empty.write_bytes(b"")
    with pytest.raises(RingNotReady):
        R.MappedRing(empty)
    junk = tmp_path / "gpuflow-s-2"
    junk.write_bytes(b"\x01" * 8192)
    with pytest.raises(RingFormatError, match="bad magic"):
        R.MappedRing(junk)
    with pytest.raises(FileNotFoundError):
        R.MappedRing(tmp_path / "gpuflow-s-3")


def _copy_ring(producer, shm_dir, session, pid):
    dst = shm_dir / f"gpuflow-{session}-{pid}"
    shutil.copyfile(f"/dev/shm{producer.name}", dst)
    return dst


def test_stale_rings_are_swept_only_when_dead_unheld_and_old(rings, tmp_path):
    p = rings.producer()
    dead = _copy_ring(p, tmp_path, "dead", fake_pid())
    held = _copy_ring(p, tmp_path, "held", fake_pid())
    alive = _copy_ring(p, tmp_path, "alive", os.getpid())
    ours = _copy_ring(p, tmp_path, "ours", fake_pid())
    other = tmp_path / "not-a-ring"
    other.write_text("x")
    consumer = R.MappedRing(held)
    try:
        later = time.time() + R.STALE_GRACE_S + 1
        assert R.remove_stale_rings(tmp_path, keep_session="ours") == []  # all too young
        assert R.remove_stale_rings(tmp_path, keep_session="ours", now=later) == [dead]
        assert sorted(x.name for x in tmp_path.iterdir()) == sorted(
            [held.name, alive.name, ours.name, other.name])
    finally:
        consumer.close()
    assert R.remove_stale_rings(tmp_path, keep_session="ours", now=later) == [held]
