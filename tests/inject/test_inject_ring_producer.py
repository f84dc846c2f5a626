"""The ring producer (cupti_src/ring_producer.c) through the compiled test producer: creation (a
sealed memory file), header layout, the handover (cupti_src/ring_handover.c), head/tail/drop
accounting, name interning and chunking (across wraparound, all-or-nothing when nearly full), and
the raw helpers other tests rely on.

Rings are read back with tests/support/ringread.py, an independent struct-based reader.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ringproducer as rpm
from child_env import with_support
from ringproducer import RingProducer, load_library, pack_record
from ringread import RING_FILE_NAME, read_ring

CAP = 1024


def ring(lib, pid=4242, cap=CAP):
    return RingProducer(lib, pid, cap)


def consume_all(r: RingProducer) -> None:
    """Act as a consumer that drained everything: tail = head."""
    read_ring(r.fd, consume=True)


# ------------------------------------------------------------------------------ header ------

def test_header_layout_matches_the_c_header(tmp_path):
    """The ctypes mirror and the reader agree with gpuflow_ring.h, offset for offset."""
    src = tmp_path / "off.c"
    src.write_text(textwrap.dedent("""
        #include <stdio.h>
        #include <stddef.h>
        #include "gpuflow_ring.h"
        #define F(f) printf(#f " %zu\\n", offsetof(gpuflow_ring_header, f));
        int main(void) {
          F(magic) F(version) F(header_size) F(record_size) F(capacity) F(producer_pid)
          F(status) F(session) F(clock_cupti_ns) F(clock_wall_ns) F(cupti_version) F(flush_ms)
          F(started_wall_ns) F(status_detail) F(head) F(tail) F(dropped_ring) F(dropped_cupti)
          F(incomplete) F(producer_exited) F(buffers_completed) F(translate_cpu_ns)
          printf("MAGIC %llu\\nVERSION %u\\nHEADER %u\\nRECORD %u\\nCHUNK %u\\nNAMEMAX %u\\n",
                 (unsigned long long)GPUFLOW_RING_MAGIC, GPUFLOW_RING_VERSION,
                 GPUFLOW_HEADER_SIZE, GPUFLOW_RECORD_SIZE, GPUFLOW_NAME_CHUNK_TEXT,
                 GPUFLOW_NAME_MAX);
          return 0;
        }"""))
    exe = tmp_path / "off"
    subprocess.run(["gcc", "-std=c11", f"-I{rpm.CUPTI_SRC}", str(src), "-o", str(exe)],
                   check=True)
    got = dict(line.split() for line in subprocess.run([str(exe)], capture_output=True,
                                                       text=True, check=True).stdout.splitlines())
    for name, _ in rpm.RingHeader._fields_:
        if not name.startswith("_"):
            assert getattr(rpm.RingHeader, name).offset == int(got[name]), name
    assert int(got["MAGIC"]) == rpm.MAGIC and int(got["VERSION"]) == rpm.VERSION
    assert int(got["HEADER"]) == rpm.HEADER_SIZE and int(got["RECORD"]) == rpm.RECORD_SIZE
    assert int(got["CHUNK"]) == rpm.NAME_CHUNK_TEXT and int(got["NAMEMAX"]) == rpm.NAME_MAX


def test_record_layouts_match_the_c_header(tmp_path):
    """The KERNEL payload's launch id and the LAUNCH record (version 3), as the Python readers and
    the decoders' shared definition (_layout.LAUNCH_PAYLOAD) see them, against gpuflow_ring.h."""
    from gpuflow.collectors.cupti import _layout
    src = tmp_path / "rec.c"
    src.write_text(textwrap.dedent("""
        #include <stdio.h>
        #include <stddef.h>
        #include "gpuflow_ring.h"
        #define R(f) printf(#f " %zu\\n", offsetof(gpuflow_record, f));
        int main(void) {
          R(body.act.u.kernel.registers) R(body.act.u.kernel.launch_id) R(body.act.u.kernel.graph_id)
          R(body.launch.static_shared_bytes) R(body.launch.dynamic_shared_bytes)
          R(body.launch.shared_executed_bytes) R(body.launch.cluster_x) R(body.launch.cluster_y)
          R(body.launch.cluster_z) R(body.launch.shared_config) R(body.launch.shmem_limit_config)
          R(body.launch.carveout_requested) R(body.launch.cache_config)
          printf("LAUNCH %d\\nFLAG_CARVEOUT %u\\n", GPUFLOW_REC_LAUNCH, GPUFLOW_FLAG_CARVEOUT);
          return 0;
        }"""))
    exe = tmp_path / "rec"
    subprocess.run(["gcc", "-std=c11", f"-I{rpm.CUPTI_SRC}", str(src), "-o", str(exe)], check=True)
    got = dict(line.rsplit(" ", 1) for line in subprocess.run([str(exe)], capture_output=True, text=True,
                                                              check=True).stdout.splitlines())
    assert (int(got["body.act.u.kernel.registers"]), int(got["body.act.u.kernel.launch_id"]),
            int(got["body.act.u.kernel.graph_id"])) == (54, 56, 60)
    fields = ["static_shared_bytes", "dynamic_shared_bytes", "shared_executed_bytes", "cluster_x", "cluster_y",
              "cluster_z", "shared_config", "shmem_limit_config", "carveout_requested", "cache_config"]
    offsets, at = [], 8
    for code in _layout.LAUNCH_PAYLOAD.format.lstrip("<"):
        offsets.append(at)
        at += struct.calcsize(code)
    assert [int(got[f"body.launch.{f}"]) for f in fields] == offsets
    assert int(got["LAUNCH"]) == rpm.REC_LAUNCH == _layout.REC_LAUNCH
    assert int(got["FLAG_CARVEOUT"]) == rpm.FLAG_CARVEOUT == _layout.FLAG_CARVEOUT


def test_a_ring_is_a_reserved_sealed_memory_file_with_a_valid_header(producer_lib):
    before = time.time_ns()
    with ring(producer_lib, pid=777, cap=2048) as r:
        fd = r.fd
        st = os.fstat(fd)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
        assert st.st_size == rpm.HEADER_SIZE + 2048 * rpm.RECORD_SIZE
        assert st.st_blocks * 512 >= st.st_size  # posix_fallocate reserved the memory
        assert os.readlink(f"/proc/self/fd/{fd}") == RING_FILE_NAME   # no name anywhere
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC       # never inherited by an exec
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) == fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
        h = read_ring(fd).header
        assert h["magic"] == rpm.MAGIC and h["version"] == rpm.VERSION
        assert (h["header_size"], h["record_size"], h["capacity"]) == (4096, 64, 2048)
        assert h["producer_pid"] == 777 and h["session"] == ""
        assert h["status"] == rpm.STATUS_STARTING and h["producer_exited"] == 0
        assert h["head"] == h["tail"] == h["dropped_ring"] == 0
        assert before <= h["started_wall_ns"] <= time.time_ns()
    with pytest.raises(OSError):
        os.fstat(fd)   # closed with the ring


@pytest.mark.parametrize("pid,cap", [(1, 1000), (1, 512), (1, 1 << 27), (0, CAP), (-3, CAP)])
def test_open_rejects_bad_capacities_and_pids(producer_lib, pid, cap):
    with pytest.raises(OSError) as exc:
        RingProducer(producer_lib, pid, cap)
    assert exc.value.errno == errno.EINVAL


def test_two_rings_are_two_memory_files(producer_lib):
    with ring(producer_lib) as a, ring(producer_lib) as b:
        assert os.fstat(a.fd).st_ino != os.fstat(b.fd).st_ino


def test_a_ring_that_cannot_be_reserved_fails_cleanly(producer_lib):
    """A size limit hit while reserving gives -errno and leaves no memory file behind (no SIGBUS)."""
    code = textwrap.dedent(f"""
        import os, resource, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        from ringproducer import RingProducer
        try:
            RingProducer({producer_lib!r}, 99, 1 << 16)
        except OSError as e:
            print("errno", e.errno)
        print("left", sum(os.readlink("/proc/self/fd/" + f).startswith("/memfd:gpuflow-ring")
                          for f in os.listdir("/proc/self/fd") if os.path.exists("/proc/self/fd/" + f)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30, env=with_support())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["errno", str(errno.EFBIG), "left", "0"]


# ----------------------------------------------------------------------------- handover -----

def test_a_ring_is_handed_over_once_with_its_descriptor(producer_lib, catcher):
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, 10, 20, "_Z1kv")
        connection = r.hand_over(catcher.path)
        fd = catcher.ring_fd(os.getpid())   # the peer's pid, from the kernel
        assert os.fstat(fd).st_ino == os.fstat(r.fd).st_ino
        assert read_ring(fd).of_type(rpm.REC_KERNEL)[0]["name"] == "_Z1kv"
        assert fcntl.fcntl(connection.fileno(), fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        connection.close()
        catcher.wait_ended(os.getpid())   # the end of the connection is the end of the producer
    assert catcher.refused == []


@pytest.mark.parametrize("where, code", [("relative", errno.EINVAL), ("long", errno.EINVAL),
                                         ("missing", errno.ENOENT), ("stale", errno.ECONNREFUSED)])
def test_a_handover_with_no_agent_fails_at_once(producer_lib, tmp_path, where, code):
    import socket
    path = {"relative": "ring.sock", "long": "/" + "x" * 108, "missing": str(tmp_path / "none.sock"),
            "stale": str(tmp_path / "stale.sock")}[where]
    if where == "stale":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(path)
        s.close()
    with ring(producer_lib) as r:
        started = time.monotonic()
        with pytest.raises(OSError) as exc:
            r.hand_over(path, wait_ms=5000)
        assert exc.value.errno == code and time.monotonic() - started < 1.0


def test_a_busy_agent_costs_the_program_at_most_the_wait(producer_lib, tmp_path):
    """An agent whose backlog is full (it accepts nothing): the handover gives up after its bound."""
    import socket
    path = str(tmp_path / "busy.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(0)
    queued = []
    with ring(producer_lib) as r:
        try:
            for _ in range(4):   # fill the backlog (listen(0) still queues one or two)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_NONBLOCK)
                try:
                    s.connect(path)
                    queued.append(s)
                except BlockingIOError:
                    s.close()
                    break
            started = time.monotonic()
            with pytest.raises(OSError) as exc:
                r.hand_over(path, wait_ms=150)
            waited = time.monotonic() - started
            assert exc.value.errno == errno.ETIMEDOUT and 0.14 <= waited < 1.0
        finally:
            for s in queued:
                s.close()
            listener.close()


# ------------------------------------------------------------------- head, tail, drops -----

def test_head_tail_and_drop_accounting(producer_lib):
    with ring(producer_lib) as r:
        for i in range(CAP):
            assert r.memcpy(0, 1, 2, 10 + i, 20 + i, rpm.COPY_HTOD, 64)
        assert (r.head, r.tail, r.dropped) == (CAP, 0, 0)
        assert not r.memcpy(0, 1, 2, 5, 6, rpm.COPY_HTOD, 64)
        assert not r.kernel(0, 1, 2, 5, 6, "_Z1kv")
        assert (r.head, r.dropped) == (CAP, 2)
        assert r.header.dropped_ring == 2
        rd = read_ring(r.fd, consume=True)
        assert len(rd.records) == CAP and r.tail == CAP
        assert [rec["start"] for rec in rd.records] == [10 + i for i in range(CAP)]
        for i in range(100):
            assert r.memcpy(0, 1, 2, 1, 2, rpm.COPY_DTOH, 8)
        assert (r.head, r.dropped) == (CAP + 100, 2)


def test_producer_never_overwrites_when_the_consumer_tail_is_nonsense(producer_lib):
    with ring(producer_lib) as r:
        for _ in range(CAP):
            assert r.memset(0, 1, 2, 1, 2, 16)
        r.header.tail = CAP * 10  # a consumer writing garbage: tail far beyond head
        assert not r.memset(0, 1, 2, 1, 2, 16)
        assert r.dropped == 1 and r.head == CAP


def test_records_carry_exactly_the_fields_given(producer_lib):
    with ring(producer_lib) as r:
        assert r.kernel(3, 4, 5, 100, 250, "_Z3fooPf", grid=(70000, 3, 2), block=(256, 2, 1))
        assert r.kernel(3, 4, 5, 100, 250, "_Z3fooPf", 7, 1, 1, 32, 1, 1)
        assert r.kernel(3, 4, 5, 100, 250, "_Z3fooPf", (8, 1, 1), (64, 1, 1))
        assert r.memcpy(1, 2, 3, 10, 20, rpm.COPY_PTOP, 1 << 33, src_dev=1, dst_dev=6)
        assert r.memset(2, 3, 4, 30, 31, 4096, value=0xAB)
        assert r.context(0, 9, 7)
        assert r.clock_sync(123, 456)
        recs = [x for x in read_ring(r.fd).records if x["type"] != rpm.REC_NAME_CHUNK]
        k, k2, k3, m, s, c, cs = recs
        assert (k2["grid"], k2["block"], k3["grid"], k3["block"]) == \
            ((7, 1, 1), (32, 1, 1), (8, 1, 1), (64, 1, 1))
        assert (k["type"], k["device"], k["context"], k["stream"]) == (1, 3, 4, 5)
        assert (k["start"], k["end"], k["grid"], k["block"]) == (100, 250, (70000, 3, 2),
                                                                 (256, 2, 1))
        assert k["name"] == "_Z3fooPf" and k["flags"] == 0 and k["correlation"] >= 1
        assert (m["type"], m["copy_kind"], m["bytes"], m["src_device"], m["dst_device"]) == \
            (2, rpm.COPY_PTOP, 1 << 33, 1, 6)
        assert (s["type"], s["bytes"], s["value"], s["device"], s["stream"]) == \
            (3, 4096, 0xAB, 2, 4)
        assert (c["type"], c["device"], c["context"], c["stream"]) == (6, 0, 9, 7)
        assert (cs["type"], cs["start"], cs["end"]) == (7, 123, 456)
        assert (r.header.clock_cupti_ns, r.header.clock_wall_ns) == (123, 456)


@pytest.mark.parametrize("start,end", [(0, 0), (500, 400), (7, 0)])
def test_missing_or_impossible_timing_is_flagged_and_counted(producer_lib, start,
                                                            end):
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, start, end, "_Z1kv")
        assert r.memcpy(0, 1, 2, start, end, rpm.COPY_HTOD, 1)
        assert r.memcpy(0, 1, 2, 5, 9, rpm.COPY_HTOD, 1)
        acts = [x for x in read_ring(r.fd).records if x["type"] in (1, 2)]
        assert [bool(x["flags"] & rpm.FLAG_NO_TIMING) for x in acts] == [True, True, False]
        assert all((x["start"], x["end"]) == (0, 0) for x in acts[:2])
        assert r.incomplete == 2 and r.header.incomplete == 2


# ------------------------------------------------------------------------------ names -------

def test_names_are_interned_once_with_dense_ids(producer_lib):
    long_name = "_ZN5outer5innerIfLi128EE6kernelEPfPKfi" + "x" * 70  # 3 chunks
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, 1, 2, long_name)
        assert r.head == 3 + 1
        assert r.kernel(0, 1, 2, 3, 4, long_name)
        assert r.head == 5  # the second use costs one record
        assert r.kernel(0, 1, 2, 5, 6, "_Z5otherv")
        assert r.head == 7
        rd = read_ring(r.fd)
        kernels = rd.of_type(rpm.REC_KERNEL)
        assert [k["name_id"] for k in kernels] == [1, 1, 2]
        assert rd.names[1]["text"] == long_name and rd.names[2]["text"] == "_Z5otherv"
        chunks = [c for c in rd.of_type(rpm.REC_NAME_CHUNK) if c["name_id"] == 1]
        assert [c["offset"] for c in chunks] == [0, 48, 96]
        assert [c["flags"] & rpm.FLAG_NAME_LAST for c in chunks] == [0, 0, rpm.FLAG_NAME_LAST]
        assert all(c["total_len"] == len(long_name) for c in chunks)


def _name_ids(r) -> list[int]:
    return [k["name_id"] for k in read_ring(r.fd).of_type(rpm.REC_KERNEL)]


def test_without_key_epochs_every_key_hit_is_compared_with_its_text(producer_lib):
    """An address reused for another string (CUPTI freed the first) must get the other name."""
    with ring(producer_lib) as r:
        assert r.kernel_keyed(0x1000, "_Z5firstv") and r.kernel_keyed(0x1000, "_Z5firstv")
        assert r.kernel_keyed(0x1000, "_Z6secondv")
        assert _name_ids(r) == [1, 1, 2]


def test_within_a_key_epoch_a_key_is_compared_once_and_then_trusted(producer_lib):
    with ring(producer_lib) as r:
        r.key_epoch_begin()
        assert r.kernel_keyed(0x1000, "_Z5firstv") and r.kernel_keyed(0x1000, "_Z5firstv")
        # the epoch's promise (one string per key) broken on purpose: the text is not read again,
        # which is the saving; a real CUPTI buffer cannot do this
        assert r.kernel_keyed(0x1000, "_Z6secondv")
        r.key_epoch_begin()  # the next buffer: the key is compared once more, and is now another name
        assert r.kernel_keyed(0x1000, "_Z6secondv") and r.kernel_keyed(0x1000, "_Z6secondv")
        r.key_epoch_begin()  # and back: the interned first name is found by its text
        assert r.kernel_keyed(0x1000, "_Z5firstv")
        assert _name_ids(r) == [1, 1, 1, 2, 2, 1]
        names = read_ring(r.fd).names
        assert names[1]["text"] == "_Z5firstv" and names[2]["text"] == "_Z6secondv"


def test_two_keys_for_one_text_share_its_id_in_and_across_epochs(producer_lib):
    with ring(producer_lib) as r:
        for _ in range(3):
            r.key_epoch_begin()
            for key in (0x1000, 0x2000, 0x1000, 0x2000):
                assert r.kernel_keyed(key, "_Z6kernelPf")
        assert r.kernel_keyed(0x3000, "_Z6kernelPf")  # a third address, same text
        assert _name_ids(r) == [1] * 13
        assert len(read_ring(r.fd).names) == 1


def test_stream_and_device_names(producer_lib):
    with ring(producer_lib) as r:
        assert r.stream_name(0, 1, 13, "compute")
        assert r.kernel(0, 1, 13, 1, 2, "compute")  # same text, a kernel: another id
        assert r.device(0, "NVIDIA H200")
        assert r.stream_name(0, 1, 14, "compute")   # same stream name: reused, no chunks
        rd = read_ring(r.fd)
        sn = rd.of_type(rpm.REC_STREAM_NAME)
        assert [(s["stream"], s["name"]) for s in sn] == [(13, "compute"), (14, "compute")]
        assert sn[0]["name_id"] == sn[1]["name_id"] != rd.of_type(rpm.REC_KERNEL)[0]["name_id"]
        assert rd.names[sn[0]["name_id"]]["flags"] & rpm.FLAG_NAME_STREAM
        kid = rd.of_type(rpm.REC_KERNEL)[0]["name_id"]
        assert not rd.names[kid]["flags"] & rpm.FLAG_NAME_STREAM
        assert rd.of_type(rpm.REC_DEVICE)[0]["name"] == "NVIDIA H200"
        assert r.head == 2 + 2 + 2 + 1


def test_empty_and_overlong_names(producer_lib):
    with ring(producer_lib, cap=4096) as r:
        assert r.stream_name(0, 1, 2, "")
        assert r.kernel(0, 1, 2, 1, 2, "k" * 5000)
        rd = read_ring(r.fd)
        empty = rd.of_type(rpm.REC_NAME_CHUNK)[0]
        assert empty["total_len"] == 0 and empty["flags"] & rpm.FLAG_NAME_LAST
        kid = rd.of_type(rpm.REC_KERNEL)[0]["name_id"]
        chunks = [c for c in rd.of_type(rpm.REC_NAME_CHUNK) if c["name_id"] == kid]
        assert len(chunks) == -(-rpm.NAME_MAX // rpm.NAME_CHUNK_TEXT)
        assert all(c["flags"] & rpm.FLAG_NAME_TRUNCATED for c in chunks)
        assert rd.names[kid]["text"] == "k" * rpm.NAME_MAX


def test_name_chunks_across_wraparound(producer_lib):
    name = "_Z" + "".join(chr(ord("a") + i % 26) for i in range(198))  # 200 bytes: 5 chunks
    with ring(producer_lib) as r:
        for _ in range(CAP - 2):
            assert r.memset(0, 1, 2, 1, 2, 8)
        consume_all(r)
        assert r.kernel(0, 1, 2, 1, 2, name)  # chunks in slots 1022, 1023, 0, 1, 2
        assert r.head == CAP - 2 + 6
        rd = read_ring(r.fd)
        assert [x["index"] % CAP for x in rd.records] == [1022, 1023, 0, 1, 2, 3]
        assert rd.of_type(rpm.REC_KERNEL)[0]["name"] == name


def test_name_and_first_record_are_reserved_all_or_nothing(producer_lib):
    name = "_Z" + "n" * 198  # 5 chunks + the record = 6 slots
    with ring(producer_lib) as r:
        for _ in range(CAP - 5):
            assert r.memset(0, 1, 2, 1, 2, 8)
        head = r.head
        assert not r.kernel(0, 1, 2, 1, 2, name)  # 5 free < 6 needed: nothing written
        assert (r.head, r.dropped) == (head, 1)
        assert r.memset(0, 1, 2, 1, 2, 8)          # a record without a name still fits
        read_ring(r.fd, consume=True)
        # the name was never marked sent: the next use carries its chunks again
        assert r.kernel(0, 1, 2, 3, 4, name)
        rd = read_ring(r.fd)
        assert len(rd.of_type(rpm.REC_NAME_CHUNK)) == 5
        assert rd.of_type(rpm.REC_KERNEL)[0]["name"] == name
        assert r.dropped == 1


def test_exact_fit_and_sent_names_need_one_slot(producer_lib):
    name = "_Z" + "q" * 94  # 2 chunks + record = 3 slots
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, 1, 2, "_Z4sentv")
        while r.head < CAP - 3:
            assert r.memset(0, 1, 2, 1, 2, 8)
        assert r.kernel(0, 1, 2, 1, 2, name)        # exactly 3 free
        assert r.head == CAP and r.dropped == 0
        assert not r.kernel(0, 1, 2, 1, 2, "_Z4sentv")
        rd = read_ring(r.fd, consume=True)
        assert rd.of_type(rpm.REC_KERNEL)[-1]["name"] == name
        assert r.kernel(0, 1, 2, 1, 2, "_Z4sentv")  # sent long ago: one slot, no chunks
        assert r.head == CAP + 1


def test_concurrent_producers_never_tear_or_orphan_names(producer_lib):
    names = [f"_Z6kernel{i}v" + "p" * (i * 30) for i in range(6)]
    per_thread = 1500
    with ring(producer_lib, cap=16384) as r:
        def work(t):
            for i in range(per_thread):
                assert r.kernel(t, 1, t, i + 1, i + 2, names[(i + t) % len(names)])

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rd = read_ring(r.fd)  # asserts every name id is defined before use
        kernels = rd.of_type(rpm.REC_KERNEL)
        assert len(kernels) == 4 * per_thread and r.dropped == 0
        assert {k["name"] for k in kernels} == set(names)
        assert len(rd.of_type(rpm.REC_NAME_CHUNK)) == sum(max(1, -(-len(n) // 48))
                                                          for n in names)
        for t in range(4):
            mine = [k["start"] for k in kernels if k["device"] == t]
            assert mine == list(range(1, per_thread + 1))


# ------------------------------------------------------------- status, exit, raw hooks -----

def test_status_detail_and_counters(producer_lib):
    with ring(producer_lib) as r:
        r.set_status(rpm.STATUS_CUPTI_IN_USE, "held by Nsight Systems")
        r.add_cupti_dropped(5)
        r.add_cupti_dropped(7)
        h = read_ring(r.fd).header
        assert h["status"] == rpm.STATUS_CUPTI_IN_USE
        assert h["status_detail"] == "held by Nsight Systems" and h["dropped_cupti"] == 12
        r.set_status(rpm.STATUS_OK, "d" * 1000)
        assert read_ring(r.fd).header["status_detail"] == "d" * 255


def test_mark_exited_freezes_the_ring(producer_lib):
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, 1, 2, "_Z1kv")
        r.mark_exited()
        assert r.header.producer_exited == 1
        assert not r.kernel(0, 1, 2, 1, 2, "_Z1kv")
        r.set_status(rpm.STATUS_CUPTI_ERROR, "too late")
        assert (r.head, r.dropped, r.header.status) == (2, 0, rpm.STATUS_STARTING)


def test_raw_helpers_for_malformed_input_tests(producer_lib):
    with ring(producer_lib) as r:
        assert r.push_raw(pack_record(rpm.REC_KERNEL, start=9, end=3, payload=b"\x01" * 32))
        r.write_raw(5, b"\xff" * 64)
        r.set_head(6)  # slots 1..4 were never written: torn (type 0)
        rd = read_ring(r.fd, strict=False)
        assert [x["type"] for x in rd.records] == [1, 0, 0, 0, 0, 0xFFFF]
        assert (rd.records[0]["start"], rd.records[0]["end"]) == (9, 3)
        r.corrupt_header(magic=1, version=99, record_size=32, capacity=1000, header_size=8)
        h = read_ring(r.fd, strict=False).header
        assert (h["magic"], h["version"], h["record_size"], h["capacity"], h["header_size"]) \
            == (1, 99, 32, 1000, 8)
        with pytest.raises(ValueError):
            r.push_raw(b"short")


def test_several_rings_in_one_process(producer_lib):
    with ring(producer_lib, pid=1) as a, ring(producer_lib, pid=2) as b:
        assert a.kernel(0, 1, 2, 1, 2, "_Z1av") and b.kernel(0, 1, 2, 1, 2, "_Z1bv")
        assert a.kernel(0, 1, 2, 1, 2, "_Z1av")
        assert (a.head, b.head) == (3, 2)
        assert read_ring(b.fd).of_type(rpm.REC_KERNEL)[0]["name"] == "_Z1bv"


def test_global_tp_api(producer_lib):
    lib = load_library(producer_lib)
    assert lib.tp_open(31337, CAP) == 0
    try:
        assert lib.tp_open(31338, CAP) == -errno.EBUSY
        assert lib.tp_kernel(0, 1, 2, 10, 20, b"_Z1kv", 1, 1, 1, 32, 1, 1) == 1
        assert lib.tp_memcpy(0, 1, 2, 10, 20, rpm.COPY_DTOH, 4096, 0, 0) == 1
        assert lib.tp_memset(0, 1, 2, 10, 20, 4096, 0) == 1
        assert lib.tp_stream_name(0, 1, 2, b"prefetch_h2d") == 1
        assert lib.tp_context(0, 1, 7) == 1
        assert lib.tp_device(0, b"GPU") == 1
        assert lib.tp_clock_sync(1, 2) == 1
        lib.tp_set_status(rpm.STATUS_OK, b"fine")
        lib.tp_add_cupti_dropped(3)
        assert (lib.tp_head(), lib.tp_tail(), lib.tp_dropped()) == (10, 0, 0)
        rd = read_ring(lib.tp_fd())
        assert rd.header["status_detail"] == "fine" and rd.header["dropped_cupti"] == 3
        assert rd.header["producer_pid"] == 31337
        lib.tp_mark_exited()
        assert lib.tp_kernel(0, 1, 2, 10, 20, b"_Z1kv", 1, 1, 1, 1, 1, 1) == 0
        assert read_ring(lib.tp_fd()).header["producer_exited"] == 1
    finally:
        assert lib.tp_close() == 0
    assert lib.tp_close() == -errno.EBADF
    assert lib.tp_fd() == -errno.EBADF
    assert lib.tp_kernel(0, 1, 2, 1, 2, b"x", 1, 1, 1, 1, 1, 1) == 0  # no ring: dropped


def test_an_agents_copy_outlives_the_producers_close(producer_lib):
    r = ring(producer_lib)
    assert r.kernel(0, 1, 2, 1, 2, "_Z1kv")
    agents = os.dup(r.fd)
    assert r.close() == 0
    try:
        assert read_ring(agents).of_type(rpm.REC_KERNEL)[0]["name"] == "_Z1kv"
    finally:
        os.close(agents)
    with pytest.raises(ValueError):
        r.head
    assert ctypes.sizeof(rpm.RingHeader) <= rpm.HEADER_SIZE


# --------------------------------------------------------- launch configurations (version 3) -----

def launches_of(r) -> list[dict]:
    return read_ring(r.fd).of_type(rpm.REC_LAUNCH)


def test_a_launch_configuration_is_interned_once_before_its_first_kernel(producer_lib):
    with ring(producer_lib) as r:
        config = dict(registers=64, static_shared=4096, dynamic_shared=8192, shared_executed=65536,
                      cluster=(2, 1, 1), shared_config=1, shmem_limit_config=1, carveout=50, cache_config=0x21)
        assert r.kernel_launch(0, 1, 2, 10, 20, "_Z1av", **config)
        assert r.kernel_launch(0, 1, 2, 30, 40, "_Z1av", **config)            # the same: no new record
        assert r.kernel_launch(0, 1, 2, 50, 60, "_Z1bv", **config)            # another name, same config
        assert r.kernel_launch(0, 1, 2, 70, 80, "_Z1av", **{**config, "dynamic_shared": 0})  # changed
        assert r.kernel_launch(0, 1, 2, 90, 99, "_Z1av", **config)            # back: the first id again
        rd = read_ring(r.fd)
        types = [x["type"] for x in rd.records]
        # chunk, LAUNCH 1, kernel; kernel; chunk, kernel; LAUNCH 2, kernel; kernel
        assert types == [4, 9, 1, 1, 4, 1, 9, 1, 1]
        kernels = rd.of_type(rpm.REC_KERNEL)
        assert [k["launch_id"] for k in kernels] == [1, 1, 1, 2, 1] and r.launches == 2
        assert all(k["registers"] == 64 for k in kernels)
        one, two = launches_of(r)
        assert (one["static_shared"], one["dynamic_shared"], one["shared_executed"], one["cluster"]) == (
            4096, 8192, 65536, (2, 1, 1))
        assert (one["shared_config"], one["shmem_limit_config"], one["carveout"], one["cache_config"]) == (1, 1, 50, 0x21)
        assert two["dynamic_shared"] == 0 and two["launch_id"] == 2


def test_no_carveout_and_a_carveout_of_zero_are_two_configurations(producer_lib):
    with ring(producer_lib) as r:
        assert r.kernel_launch(0, 1, 2, 10, 20, "_Z1kv", carveout=None)
        assert r.kernel_launch(0, 1, 2, 10, 20, "_Z1kv", carveout=0)
        one, two = launches_of(r)
        assert (one["carveout"], two["carveout"]) == (None, 0) and one["flags"] == 0
        assert two["flags"] == rpm.FLAG_CARVEOUT


def test_a_kernel_without_a_configuration_has_launch_id_0_and_no_launch_record(producer_lib):
    with ring(producer_lib) as r:
        assert r.kernel(0, 1, 2, 10, 20, "_Z1kv")
        assert [k["launch_id"] for k in read_ring(r.fd).of_type(rpm.REC_KERNEL)] == [0]
        assert launches_of(r) == [] and r.launches == 0


def test_a_kernel_and_its_launch_record_are_written_together_or_dropped_together(producer_lib):
    with ring(producer_lib) as r:
        for i in range(CAP - 2):   # room for two records: chunk + kernel of a new name fits, + LAUNCH not
            assert r.memcpy(0, 1, 2, 10, 20, rpm.COPY_HTOD, 64)
        assert not r.kernel_launch(0, 1, 2, 10, 20, "_Z1kv", static_shared=1024)   # 3 needed, 2 free
        assert r.dropped == 1 and r.head == CAP - 2
        consume_all(r)
        assert r.kernel_launch(0, 1, 2, 10, 20, "_Z1kv", static_shared=1024)       # sent again, whole
        rd = read_ring(r.fd)
        assert [x["type"] for x in rd.records] == [4, 9, 1]
        assert rd.records[2]["launch"]["static_shared"] == 1024


def test_launch_ids_stop_at_the_formats_limit_and_every_kernel_still_counts(producer_lib):
    """Ids past GPUFLOW_LAUNCH_ID_MAX (65,536) were handed out, and the decoders refuse them: each
    kernel of a configuration beyond it was an invalid record, missing from the counts. Now such a
    kernel carries launch id 0 (none known), as a kernel without a configuration does."""
    from gpuflow.collectors.cupti import _layout as L
    from gpuflow.collectors.cupti.decoder import RingDecoder

    limit = L.LAUNCH_ID_LIMIT
    with RingProducer(producer_lib, 4242, 1 << 18) as r:
        for i in range(limit + 3):   # a kernel launched with ever new dynamic shared memory
            assert r.kernel_launch(0, 1, 2, 10 + i, 20 + i, "_Z1kv", dynamic_shared=i)
        assert r.launches == limit
        kernels = read_ring(r.fd).of_type(rpm.REC_KERNEL)
        assert [k["launch_id"] for k in kernels[-4:]] == [limit, 0, 0, 0]
        with mmap_ring(r) as mm:   # and what an agent makes of it
            dec = RingDecoder(mm)
            dec.drain()
            counters = dec.counters()
            assert counters["invalid_records"] == 0, counters["invalid"]
            ((_nid, count, *_rest),) = dec.kernels()
            assert count == limit + 3
            dec.detach()


def mmap_ring(r):
    import mmap
    return mmap.mmap(r.fd, os.fstat(r.fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


def test_a_batch_holds_the_ring_for_its_thread_while_the_others_wait(producer_lib):
    """rp_batch_begin/rp_batch_end (one lock for a CUPTI buffer's records): the thread holding the
    batch pushes and updates the header as always; another thread's push waits for the batch's end,
    then goes in whole."""
    with ring(producer_lib) as r:
        held, release, other_done = threading.Event(), threading.Event(), threading.Event()

        def holder():
            r.batch_begin()
            r.key_epoch_begin()
            assert r.kernel(0, 1, 2, 10, 20, "_Z1kv") and r.memcpy(0, 1, 2, 30, 40, rpm.COPY_HTOD, 64)
            r.set_status(1, "batch")
            held.set()
            release.wait(10)
            r.batch_end()

        def other():
            held.wait(10)
            assert r.clock_sync(5, 6)
            other_done.set()

        threads = [threading.Thread(target=f, daemon=True) for f in (holder, other)]
        for t in threads:
            t.start()
        assert held.wait(5), "the batch's own calls did not go through"
        time.sleep(0.3)
        assert not other_done.is_set()  # read below without the lock: the ring's memory itself
        assert [x["type"] for x in read_ring(r.fd).records] == [rpm.REC_NAME_CHUNK, rpm.REC_KERNEL, rpm.REC_MEMCPY]
        release.set()
        assert other_done.wait(5)
        for t in threads:
            t.join(5)
        assert [x["type"] for x in read_ring(r.fd).records][-1] == rpm.REC_CLOCK_SYNC
        assert r.header.status == 1
