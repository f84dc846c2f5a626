"""What a handed-over descriptor must be before the agent maps it, and the process name.

Every refusal here is a descriptor a peer could send: none may block (a FIFO is never opened for
reading, only looked at), none may be mapped unless its size can never change (no SIGBUS), none
may be believed beyond what its header and its size agree on.
"""

from __future__ import annotations

import fcntl
import mmap
import os

import pytest

from gpuflow.collectors.cupti import rings as R
from gpuflow.collectors.cupti.errors import RingFormatError

from .conftest import fake_pid

OURS = frozenset((os.geteuid(), 0))
RING_BYTES = R.MIN_RING_BYTES


def memfd(size: int = RING_BYTES, seals: int = R.REQUIRED_SEALS, *, content: bytes = b"") -> int:
    fd = os.memfd_create("test-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if content:
        os.pwrite(fd, content, 0)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def ring_bytes(producer) -> bytes:
    with mmap.mmap(producer.fd, 0, prot=mmap.PROT_READ) as mm:
        return bytes(mm)


def test_a_ring_the_producer_made_is_mapped(rings):
    p = rings.producer(capacity=2048)
    p.kernel(0, 1, 13, 10, 20, "_Z1kv")
    mapped = R.MappedRing(os.dup(p.fd), OURS)
    assert (mapped.info.capacity, mapped.info.head, mapped.info.tail) == (2048, 2, 0)
    assert os.fstat(p.fd).st_size == len(mapped.mmap)
    mapped.close()


def test_the_producer_seals_its_ring_before_anyone_sees_it(rings):
    p = rings.producer()
    assert fcntl.fcntl(p.fd, fcntl.F_GET_SEALS) & R.REQUIRED_SEALS == R.REQUIRED_SEALS
    with pytest.raises(PermissionError):
        os.ftruncate(p.fd, 0)   # the shrink that used to SIGBUS a consumer
    with pytest.raises(PermissionError):
        os.ftruncate(p.fd, RING_BYTES * 4)


@pytest.mark.parametrize("make, message", [
    (lambda tmp: os.open(tmp / "fifo", os.O_RDWR | os.O_NONBLOCK) if not os.mkfifo(tmp / "fifo") else -1,
     "not a regular file but a FIFO"),
    (lambda tmp: os.open("/dev/zero", os.O_RDWR), "not a regular file but a character device"),
    (lambda tmp: os.open(tmp, os.O_RDONLY | os.O_DIRECTORY), "not a regular file but a directory"),
    (lambda tmp: _plain_file(tmp / "ring"), "not a sealable memory file"),
    (lambda tmp: memfd(seals=0), "not sealed against shrinking, growing and further seals (seals 0x0)"),
    (lambda tmp: memfd(seals=fcntl.F_SEAL_SHRINK), "not sealed against shrinking, growing"),
    (lambda tmp: memfd(seals=fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL), "not sealed against shrinking, growing"),
    (lambda tmp: memfd(RING_BYTES - 64), f"outside [{RING_BYTES},"),
    (lambda tmp: memfd(R.MAX_RING_BYTES + 4096), f"outside [{RING_BYTES}, {R.MAX_RING_BYTES}]"),
    (lambda tmp: memfd(0), f"the ring is 0 bytes, outside [{RING_BYTES},"),
])
def test_descriptors_that_are_not_rings_are_refused_without_being_read(tmp_path, make, message):
    fd = make(tmp_path)
    with pytest.raises(R.RingRefused, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        R.MappedRing(fd, OURS)
    with pytest.raises(OSError):
        os.fstat(fd)   # MappedRing closed it, refused or not


def _plain_file(path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, RING_BYTES)
    return fd


def test_a_ring_of_another_user_is_refused(rings):
    p = rings.producer()
    fd = os.dup(p.fd)
    os.fchown(fd, 65534, 65534)
    with pytest.raises(R.RingRefused, match="belongs to uid 65534"):
        R.MappedRing(fd, OURS)


def test_a_read_only_descriptor_is_refused(rings):
    p = rings.producer()
    fd = os.open(f"/proc/self/fd/{p.fd}", os.O_RDONLY)
    with pytest.raises(R.RingRefused, match="not open for reading and writing"):
        R.MappedRing(fd, OURS)


def test_a_ring_sealed_against_writing_cannot_be_mapped_for_the_tail(rings):
    p = rings.producer()
    fd = memfd(content=ring_bytes(p), seals=0)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE | R.REQUIRED_SEALS)
    with pytest.raises(PermissionError):
        R.MappedRing(fd, OURS)


def test_a_ring_whose_size_disagrees_with_its_header_is_refused(rings):
    p = rings.producer(capacity=1024)
    fd = memfd(RING_BYTES * 2, content=ring_bytes(p))   # sealed, well-formed, but twice as large
    with pytest.raises(RingFormatError, match=f"is {RING_BYTES * 2} bytes but its header's capacity of "
                                              f"1024 records needs {RING_BYTES}"):
        R.MappedRing(fd, OURS)


def test_a_ring_whose_header_lies_is_refused(rings):
    p = rings.producer(capacity=1024)
    p.corrupt_header(capacity=4096)
    with pytest.raises(RingFormatError, match="too small for 4096 records"):
        R.MappedRing(os.dup(p.fd), OURS)
    p.corrupt_header(capacity=1024, magic=0)
    with pytest.raises(RingFormatError, match="magic is 0"):
        R.MappedRing(os.dup(p.fd), OURS)


def test_process_name():
    with open(f"/proc/{os.getpid()}/comm") as f:
        assert R.process_name(os.getpid()) == f.read().strip()
    assert R.process_name(fake_pid()) is None
