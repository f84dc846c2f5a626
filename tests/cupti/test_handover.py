"""The ring socket under attack: what another user, and a peer of this user that sends anything but
a ring, can do to the collector (nothing), while a real traced process keeps being drained.

Another local user (a child of the test dropped to uid 65534) cannot even reach the socket: its
directory is closed to everyone else. A socket put where others can reach it still refuses them
by their credentials. A peer of this user (trusted, but the collector must not trust it with its
liveness) may send a FIFO, an unsealed or growable memory file, one whose size disagrees with its
header, a huge one, no descriptor, garbage, two descriptors, nothing at all, or thousands of
connections: each is refused and said so in a Problem (one per reason), the collector's memory and
descriptors stay bounded, and the real ring beside them keeps being drained.
"""

from __future__ import annotations

import array
import fcntl
import os
import resource
import socket
import time

import pytest
from other_user import ATTACKER_UID, as_user, can_play_users, shared_dir, wait_child

from gpuflow.collectors.cupti import handover as H
from gpuflow.collectors.cupti import rings as R

from .test_collector import fill, poll_until


def connect(path, *, wait: bool = True) -> socket.socket:
    """A connection to the ring socket; with ``wait=False``, BlockingIOError when its backlog is full."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | (0 if wait else socket.SOCK_NONBLOCK))
    try:
        s.connect(str(path))
    except BaseException:
        s.close()
        raise
    return s


def send(path, data: bytes = H.HELLO, fds: tuple[int, ...] = ()) -> socket.socket:
    """Connect to the ring socket and send one message; the connection stays open."""
    s = connect(path)
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
    s.sendmsg([data], ancillary)
    return s


def sealed_memfd(size: int, seals: int = R.REQUIRED_SEALS, content: bytes = b"") -> int:
    fd = os.memfd_create("not-a-ring", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if content:
        os.pwrite(fd, content, 0)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def kernels_of(part, pid) -> int:
    return sum(k.count for t in part.traced if t.pid == pid for k in t.kernels)


def problem_of(part, reason: str) -> str:
    found = [p.message for p in part.problems if f"refused ({reason})" in p.message]
    assert found, f"no refusal {reason!r} among {[p.message for p in part.problems]}"
    return found[0]


@pytest.mark.skipif(not can_play_users(), reason="needs root to play another user")
def test_another_user_cannot_reach_the_ring_socket(collector_factory, rings):
    c = collector_factory()
    tried = rings.socket_path

    def knock() -> None:
        try:
            connect(tried)
        except PermissionError:
            return   # the private directory stops it before the socket
        raise AssertionError("another user connected to the ring socket")

    assert wait_child(as_user(ATTACKER_UID, knock), 20) == 0
    c.poll()
    assert c.part().problems == ()   # nothing even reached the collector


@pytest.mark.skipif(not can_play_users(), reason="needs root to play another user")
def test_a_socket_others_can_reach_still_refuses_them_by_their_credentials(producer_lib):
    folder = shared_dir()
    try:
        sock = H.RingSocket(folder / "ring.sock", owns_directory=False)
        os.chmod(sock.path, 0o777)
        p_r, p_w = os.pipe()

        def hand_over_from_afar() -> None:
            s = connect(sock.path)
            os.write(p_w, b"c")
            try:
                s.sendmsg([H.HELLO], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                       array.array("i", [sealed_memfd(R.MIN_RING_BYTES)]).tobytes())])
            except (BrokenPipeError, ConnectionResetError):
                return   # the agent closed it already, unread: what it should do
            time.sleep(1.0)

        attacker = as_user(ATTACKER_UID, hand_over_from_afar)
        os.close(p_w)
        assert os.read(p_r, 1) == b"c"
        deadline = time.monotonic() + 10
        got = []
        while not got and time.monotonic() < deadline:
            got = sock.receive()
            time.sleep(0.01)
        (refusal,) = got
        assert isinstance(refusal, H.Refusal) and refusal.reason == "foreign_user" and refusal.uid == ATTACKER_UID
        assert wait_child(attacker, 20) == 0
        sock.close()
    finally:
        import shutil
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("what, reason, detail", [
    ("fifo", "not_a_ring", "not a regular file but a FIFO"),
    ("unsealed", "not_a_ring", "not sealed against shrinking, growing and further seals"),
    ("growable", "not_a_ring", "not sealed against shrinking, growing"),
    ("size_disagrees", "not_a_ring", "its header's capacity of 1024 records needs"),
    ("huge", "not_a_ring", "outside ["),
    ("no_descriptor", "descriptor_count", "sent 0 descriptors with its hello, not one"),
    ("garbage", "not_a_hello", "that are not GPUFlow's hello"),
    ("two_descriptors", "descriptor_count", "sent 2 descriptors with its hello, not one"),
    ("five_descriptors", "oversized_message", "or 4 descriptors"),
    ("oversized", "oversized_message", "more than 64 bytes"),
])
def test_a_peer_that_sends_anything_but_a_ring_is_refused_and_the_real_one_drains(
        collector_factory, rings, tmp_path, what, reason, detail):
    real, child = rings.traced()
    fill(real)
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    ring_bytes = os.pread(real.fd, R.MIN_RING_BYTES, 0)
    if what == "fifo":
        os.mkfifo(tmp_path / "fifo")
        fds = (os.open(tmp_path / "fifo", os.O_RDWR | os.O_NONBLOCK),)
    elif what == "unsealed":
        fds = (sealed_memfd(R.MIN_RING_BYTES, seals=0, content=ring_bytes),)
    elif what == "growable":
        fds = (sealed_memfd(R.MIN_RING_BYTES, seals=fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL, content=ring_bytes),)
    elif what == "size_disagrees":
        fds = (sealed_memfd(R.MIN_RING_BYTES * 4, content=ring_bytes),)
    elif what == "huge":
        fds = (sealed_memfd(R.MAX_RING_BYTES + (1 << 30)),)   # sparse: costs nothing to make
    elif what in ("no_descriptor", "garbage", "oversized"):
        fds = ()
    else:
        fds = tuple(sealed_memfd(R.MIN_RING_BYTES, content=ring_bytes)
                    for _ in range(2 if what == "two_descriptors" else 5))
    data = {"garbage": os.urandom(8), "oversized": H.HELLO * 20}.get(what, H.HELLO)
    peer = send(rings.socket_path, data, fds)
    for fd in fds:
        os.close(fd)
    real.kernel(0, 1, 13, 2_000_000, 2_000_100, "_Z13attention_fwdPKfPfi")   # the program goes on
    part = poll_until(c, lambda part: part.problems and kernels_of(part, child.pid) == 4)
    assert detail in problem_of(part, reason)
    assert [t.pid for t in part.traced] == [child.pid]   # nothing else became a traced process
    assert peer.recv(1) == b""   # the collector closed the connection
    peer.close()


def test_a_peer_that_connects_and_sends_nothing_is_dropped_after_its_deadline(collector_factory, rings,
                                                                              monkeypatch):
    monkeypatch.setattr(H, "MESSAGE_DEADLINE_S", 0.3)
    c = collector_factory()
    silent = connect(rings.socket_path)
    c.poll()
    assert not c.part().problems
    time.sleep(0.35)
    part = poll_until(c, lambda part: part.problems)
    assert "connected but sent no ring within 0.3 s" in problem_of(part, "no_message")
    assert silent.recv(1) == b""
    silent.close()


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_thousands_of_connections_leave_the_collector_live_and_bounded(collector_factory, rings):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))
    real, child = rings.traced()
    fill(real)
    c = collector_factory()
    poll_until(c, lambda part: part.traced)
    before = open_descriptors()
    crowd: list[socket.socket] = []
    try:
        for n in range(3000):
            try:
                crowd.append(connect(rings.socket_path, wait=False))
            except BlockingIOError:   # the backlog is full until the collector's next pass
                c.poll()
            if n % 200 == 0:
                c.poll()
                real.kernel(0, 1, 13, 3_000_000 + n, 3_000_100 + n, "_Z4movev")
        part = poll_until(c, lambda part: kernels_of(part, child.pid) == 3 + 15)
        # the collector holds at most the waiting ones (and its one ring); the crowd holds the rest
        held_by_collector = open_descriptors() - before - len(crowd)
        assert held_by_collector <= H.MAX_WAITING + 2, held_by_collector
        assert "the oldest was dropped" in problem_of(part, "too_many_waiting")
        assert len(part.problems) <= 3   # one per reason, however many were refused
    finally:
        for s in crowd:
            s.close()
    assert kernels_of(c.part(), child.pid) == 18 and c.part().traced[0].state == "running"


def test_what_a_killed_agent_left_is_removed_by_the_next_and_nothing_else_and_the_live_one_hears_no_refusal(tmp_path):
    live = H.RingSocket.in_private_directory(tmp_path / "gpuflow-1111111111111111")
    dead = tmp_path / "gpuflow-0123456789abcdef"
    dead.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stale.bind(str(dead / "ring.sock"))
    stale.close()   # killed: the socket file stays, nobody listens
    empty = tmp_path / "gpuflow-00000000000000aa"
    empty.mkdir(mode=0o700)
    kept = {
        "open": tmp_path / "gpuflow-2222222222222222",          # not 0700
        "full": tmp_path / "gpuflow-3333333333333333",          # holds something else too
        "named": tmp_path / "gpuflow-users-x",                  # not an agent's name
        "linked": tmp_path / "gpuflow-4444444444444444",        # a symbolic link
    }
    kept["open"].mkdir(mode=0o755)
    kept["open"].chmod(0o755)
    kept["full"].mkdir(mode=0o700)
    (kept["full"] / "ring.sock").write_text("not a socket")
    (kept["full"] / "other").write_text("x")
    kept["named"].mkdir(mode=0o700)
    kept["linked"].symlink_to(dead)
    young = tmp_path / "gpuflow-66666666666666aa"   # another agent's, being set up: made, not yet listening
    young.mkdir(mode=0o700)
    long_ago = time.time() - H.STALE_AFTER_S - 5
    for path in (dead, empty, live.path.parent, *kept.values()):
        os.utime(path, (long_ago, long_ago), follow_symlinks=False)
    removed = H.remove_stale_directories(tmp_path)
    assert sorted(removed) == sorted([dead, empty])
    assert all(p.exists() or p.is_symlink() for p in kept.values()) and live.path.exists() and young.exists()
    # the sweep asked the live agent whether it listens: it says nothing of that (no refusal)
    assert live.receive() == [] and live.receive() == [] and not live._waiting
    live.close()
    assert not live.path.parent.exists()
    dead.mkdir(mode=0o700)   # the next agent's start sweeps too
    os.utime(dead, (long_ago, long_ago))
    H.RingSocket.in_private_directory(tmp_path / "gpuflow-5555555555555555").close()
    assert not dead.exists() and young.exists()


def test_a_probe_with_a_descriptor_is_no_probe(collector_factory, rings):
    c = collector_factory()
    fd = sealed_memfd(4096)
    try:
        peer = send(rings.socket_path, H.PROBE, (fd,))
    finally:
        os.close(fd)
    part = poll_until(c, lambda part: part.problems)
    assert "that are not GPUFlow's hello" in problem_of(part, "not_a_hello")
    peer.close()
