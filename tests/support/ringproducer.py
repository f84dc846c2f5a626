"""ctypes wrapper around the test ring producer (tests/support/test_producer.c), and couriers.

What it is for: tests of the ring consumer (decoder, collector) need rings written exactly as the
injected CUPTI collector writes them, without a GPU. The producer is compiled from the same
``cupti_src/ring_producer.c``, ``cupti_src/ring_handover.c`` and ``cupti_src/gpuflow_ring.h`` as
``libgpuflow_inject.so``, so the wire format and the handover are exercised byte for byte.

Constraints: standard library only; needs ``gcc``. Tests import it by name (pytest's
``pythonpath`` puts tests/support on the path), e.g. ``from ringproducer import build_producer,
RingProducer``. A program that only needs the library runs this file: ``python
tests/support/ringproducer.py DIR`` builds it into DIR and prints its path.

Three layers:

* ``build_producer(tmpdir) -> path`` compiles the shared library and, beside it, the courier
  (``tests/support/ring_courier.c``).
* ``RingProducer(lib_path, pid, capacity)`` creates a ring: an anonymous sealed memory file, as
  the injected library does, whose header names ``pid``. It uses the library's handle-based
  ``tph_*`` API, so one process may hold several rings at once; the library also exports the
  one-ring global ``tp_*`` API with the same semantics. ``hand_over(socket_path)`` gives it to an
  agent from this process; ``fd`` lends its descriptor.
* ``Courier(lib_path, producer, socket_path)`` hands a ring over from a process of its own (the
  agent then sees that process as the traced one, with its pid; the test goes on writing the
  ring), which exits with a status or is killed when the test says so.

Push methods return ``True`` when the record (and any name chunks it needed) was written and
``False`` when it was dropped (ring full, or after ``mark_exited``). Counting rules:
``dropped`` grows by one per rejected push (name chunks never count); kernel/copy records with
start=end=0 or end<start get FLAG_NO_TIMING, zeroed times, and count as ``incomplete``.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CUPTI_SRC = ROOT / "cupti_src"
TEST_PRODUCER_C = Path(__file__).resolve().with_name("test_producer.c")
RING_COURIER_C = Path(__file__).resolve().with_name("ring_courier.c")
COURIER_NAME = "ring_courier"

# gpuflow_ring.h, mirrored for tests (tests/inject checks these against the header).
MAGIC = 0x31474E5257465047
VERSION = 3
HEADER_SIZE = 4096
RECORD_SIZE = 64
NAME_CHUNK_TEXT = 48
NAME_MAX = 4096
MIN_CAPACITY = 1024
MAX_CAPACITY = 1 << 26

REC_KERNEL, REC_MEMCPY, REC_MEMSET, REC_NAME_CHUNK = 1, 2, 3, 4
REC_STREAM_NAME, REC_CONTEXT, REC_CLOCK_SYNC, REC_DEVICE, REC_LAUNCH = 5, 6, 7, 8, 9

FLAG_NAME_LAST = 0x0001
FLAG_NAME_TRUNCATED = 0x0002
FLAG_NAME_STREAM = 0x0004
FLAG_ASYNC = 0x0008
FLAG_NO_TIMING = 0x0010
FLAG_GRAPH = 0x0020
FLAG_CARVEOUT = 0x0040

COPY_HTOD, COPY_DTOH, COPY_DTOD, COPY_HTOH, COPY_PTOP = 1, 2, 8, 9, 10

STATUS_STARTING, STATUS_OK, STATUS_CUPTI_MISSING, STATUS_CUPTI_VERSION = 0, 1, 2, 3
STATUS_CUPTI_IN_USE, STATUS_UNSUPPORTED, STATUS_CUPTI_ERROR, STATUS_STOLEN = 4, 5, 6, 7


class RingHeader(ctypes.Structure):
    """gpuflow_ring_header, field for field (offsets asserted in tests/inject)."""

    _fields_ = [
        ("magic", ctypes.c_uint64),
        ("version", ctypes.c_uint32),
        ("header_size", ctypes.c_uint32),
        ("record_size", ctypes.c_uint32),
        ("capacity", ctypes.c_uint32),
        ("producer_pid", ctypes.c_int32),
        ("status", ctypes.c_uint32),
        ("session", ctypes.c_char * 32),
        ("clock_cupti_ns", ctypes.c_int64),
        ("clock_wall_ns", ctypes.c_int64),
        ("cupti_version", ctypes.c_uint32),
        ("flush_ms", ctypes.c_uint32),
        ("started_wall_ns", ctypes.c_int64),
        ("status_detail", ctypes.c_char * 256),
        ("_pad0", ctypes.c_uint8 * (512 - 96 - 256)),
        ("head", ctypes.c_uint64),
        ("_pad1", ctypes.c_uint8 * 56),
        ("tail", ctypes.c_uint64),
        ("_pad2", ctypes.c_uint8 * 56),
        ("dropped_ring", ctypes.c_uint64),
        ("dropped_cupti", ctypes.c_uint64),
        ("incomplete", ctypes.c_uint64),
        ("producer_exited", ctypes.c_uint32),
        ("_pad3", ctypes.c_uint32),
        ("buffers_completed", ctypes.c_uint64),
        ("translate_cpu_ns", ctypes.c_uint64),
    ]


def build_producer(tmpdir: str | os.PathLike[str]) -> str:
    """Compile the test producer and the courier into ``tmpdir``; return the library's path."""
    out = Path(tmpdir) / "libgpuflow_testproducer.so"
    handover = str(CUPTI_SRC / "ring_handover.c")
    for cmd in (["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", f"-I{CUPTI_SRC}", str(TEST_PRODUCER_C),
                 str(CUPTI_SRC / "ring_producer.c"), handover, "-pthread", "-o", str(out)],
                ["gcc", "-O2", "-Wall", "-Wextra", f"-I{CUPTI_SRC}", str(RING_COURIER_C), handover,
                 "-o", str(Path(tmpdir) / COURIER_NAME)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building the test producer failed:\n{' '.join(cmd)}\n{proc.stderr}")
    return str(out)


_u32, _u64, _int, _vp, _cp = (ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p,
                              ctypes.c_char_p)
_SIGNATURES = {
    "tph_open": (_vp, [_int, _u32, ctypes.POINTER(_int)]),
    "tph_close": (_int, [_vp]),
    "tph_fd": (_int, [_vp]),
    "tph_hand_over": (_int, [_vp, _cp, _u32]),
    "tph_kernel": (_int, [_vp, _u32, _u32, _u32, _u64, _u64, _cp] + [_u32] * 6),
    "tph_kernel_keyed": (_int, [_vp, _u64, _cp]),
    "tph_kernel_launch": (_int, [_vp, _u32, _u32, _u32, _u64, _u64, _cp, ctypes.c_uint16] + [_u32] * 8
                          + [_int, _u32]),
    "tph_launches": (_u32, [_vp]),
    "tph_key_epoch_begin": (None, [_vp]),
    "tph_batch_begin": (None, [_vp]),
    "tph_batch_end": (None, [_vp]),
    "tph_memcpy": (_int, [_vp, _u32, _u32, _u32, _u64, _u64, _u32, _u64, _u32, _u32]),
    "tph_memset": (_int, [_vp, _u32, _u32, _u32, _u64, _u64, _u64, _u32]),
    "tph_stream_name": (_int, [_vp, _u32, _u32, _u32, _cp]),
    "tph_context": (_int, [_vp, _u32, _u32, _u32]),
    "tph_device": (_int, [_vp, _u32, _cp]),
    "tph_device_facts": (_int, [_vp, _u32, _cp, _cp, _u32, _u32, _u32]),
    "tph_clock_sync": (_int, [_vp, _u64, _u64]),
    "tph_set_status": (None, [_vp, _u32, _cp]),
    "tph_add_cupti_dropped": (None, [_vp, _u64]),
    "tph_mark_exited": (None, [_vp]),
    "tph_head": (_u64, [_vp]),
    "tph_tail": (_u64, [_vp]),
    "tph_dropped": (_u64, [_vp]),
    "tph_incomplete": (_u64, [_vp]),
    "tph_push_raw": (_int, [_vp, _cp]),
    "tph_write_slot": (None, [_vp, _u64, _cp]),
    "tph_set_head": (None, [_vp, _u64]),
    "tph_header": (_vp, [_vp]),
    "tph_capacity": (_u32, [_vp]),
    # the one-ring global API
    "tp_open": (_int, [_int, _u32]),
    "tp_close": (_int, []),
    "tp_fd": (_int, []),
    "tp_kernel": (_int, [_u32, _u32, _u32, _u64, _u64, _cp] + [_u32] * 6),
    "tp_memcpy": (_int, [_u32, _u32, _u32, _u64, _u64, _u32, _u64, _u32, _u32]),
    "tp_memset": (_int, [_u32, _u32, _u32, _u64, _u64, _u64, _u32]),
    "tp_stream_name": (_int, [_u32, _u32, _u32, _cp]),
    "tp_context": (_int, [_u32, _u32, _u32]),
    "tp_device": (_int, [_u32, _cp]),
    "tp_clock_sync": (_int, [_u64, _u64]),
    "tp_set_status": (None, [_u32, _cp]),
    "tp_add_cupti_dropped": (None, [_u64]),
    "tp_mark_exited": (None, []),
    "tp_head": (_u64, []),
    "tp_tail": (_u64, []),
    "tp_dropped": (_u64, []),
}

_LIBS: dict[str, ctypes.CDLL] = {}


def load_library(lib_path: str | os.PathLike[str]) -> ctypes.CDLL:
    """Load (once per path) the compiled producer with every signature declared."""
    key = str(lib_path)
    if key not in _LIBS:
        lib = ctypes.CDLL(key)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        _LIBS[key] = lib
    return _LIBS[key]


def _b(text: str | bytes | None) -> bytes | None:
    if text is None or isinstance(text, bytes):
        return text
    return text.encode("utf-8")


class RingProducer:
    """One ring written by the test producer; the C side serialises calls with its own lock."""

    def __init__(self, lib_path: str | os.PathLike[str], pid: int, capacity: int) -> None:
        self._lib = load_library(lib_path)
        self.lib_path = str(lib_path)
        self.pid, self.capacity = pid, capacity
        err = ctypes.c_int(0)
        self._h = self._lib.tph_open(pid, capacity, ctypes.byref(err))
        if not self._h:
            raise OSError(-err.value, f"tph_open(pid={pid}, capacity={capacity}): {os.strerror(-err.value)}")

    # -- the handover ----------------------------------------------------------------------
    @property
    def fd(self) -> int:
        """The ring's memory file (owned by the producer: do not close it)."""
        return int(self._lib.tph_fd(self._handle()))

    def hand_over(self, socket_path: str | os.PathLike[str], wait_ms: int = 2000) -> socket.socket:
        """Give the ring to the agent at ``socket_path`` from this process (rh_hand_over); the
        connection comes back: closing it is this "process" ending. OSError when refused."""
        rc = int(self._lib.tph_hand_over(self._handle(), os.fsencode(socket_path), wait_ms))
        if rc < 0:
            raise OSError(-rc, f"handing the ring over to {socket_path}: {os.strerror(-rc)}")
        return socket.socket(fileno=rc)

    # -- records -------------------------------------------------------------------------
    def kernel(self, dev: int, ctx: int, stream: int, start: int, end: int, name: str | bytes,
               *dims: int | tuple[int, int, int], grid: tuple[int, int, int] | None = None,
               block: tuple[int, int, int] | None = None) -> bool:
        """Grid and block as in C (``gx, gy, gz, bx, by, bz``), as two tuples, or by keyword;
        both default to (1, 1, 1)."""
        if len(dims) == 6:
            grid, block = tuple(dims[:3]), tuple(dims[3:])
        elif len(dims) == 2:
            grid, block = dims
        elif dims:
            raise TypeError("kernel(): pass gx, gy, gz, bx, by, bz or (grid, block)")
        grid = tuple(grid or (1, 1, 1))
        block = tuple(block or (1, 1, 1))
        return bool(self._lib.tph_kernel(self._handle(), dev, ctx, stream, start, end, _b(name),
                                         *grid, *block))

    def kernel_launch(self, dev: int, ctx: int, stream: int, start: int, end: int, name: str | bytes, *,
                      registers: int = 0, static_shared: int = 0, dynamic_shared: int = 0,
                      shared_executed: int = 0, cluster: tuple[int, int, int] = (0, 0, 0),
                      shared_config: int = 0, shmem_limit_config: int = 0, carveout: int | None = None,
                      cache_config: int = 0) -> bool:
        """A kernel (grid and block 1, 1, 1) with its registers and launch configuration, which the
        producer interns (a LAUNCH record before the first kernel that uses it); ``carveout`` is the
        requested carve-out in percent, None when none was requested."""
        return bool(self._lib.tph_kernel_launch(
            self._handle(), dev, ctx, stream, start, end, _b(name), registers, static_shared, dynamic_shared,
            shared_executed, *cluster, shared_config, shmem_limit_config, -1 if carveout is None else carveout,
            cache_config))

    @property
    def launches(self) -> int:
        """Launch configurations interned so far."""
        return int(self._lib.tph_launches(self._handle()))

    def kernel_keyed(self, key: int, name: str | bytes) -> bool:
        """A kernel (device 0, context 1, stream 2) whose name is looked up by ``key`` first, as
        the injected library looks up CUPTI's name pointers; ``key`` is never dereferenced."""
        return bool(self._lib.tph_kernel_keyed(self._handle(), key, _b(name)))

    def key_epoch_begin(self) -> None:
        """rp_key_epoch_begin: from here each key stands for one string until the next call."""
        self._lib.tph_key_epoch_begin(self._handle())

    def batch_begin(self) -> None:
        """rp_batch_begin: the calling thread holds the ring until :meth:`batch_end`; other
        threads' calls wait (ctypes lets them run meanwhile)."""
        self._lib.tph_batch_begin(self._handle())

    def batch_end(self) -> None:
        self._lib.tph_batch_end(self._handle())

    def memcpy(self, dev: int, ctx: int, stream: int, start: int, end: int, copy_kind: int,
               nbytes: int, src_dev: int | None = None, dst_dev: int | None = None) -> bool:
        src = dev if src_dev is None else src_dev
        dst = dev if dst_dev is None else dst_dev
        return bool(self._lib.tph_memcpy(self._handle(), dev, ctx, stream, start, end, copy_kind,
                                         nbytes, src, dst))

    def memset(self, dev: int, ctx: int, stream: int, start: int, end: int, nbytes: int,
               value: int = 0) -> bool:
        return bool(self._lib.tph_memset(self._handle(), dev, ctx, stream, start, end, nbytes,
                                         value))

    def stream_name(self, dev: int, ctx: int, stream: int, name: str | bytes) -> bool:
        return bool(self._lib.tph_stream_name(self._handle(), dev, ctx, stream, _b(name)))

    def context(self, dev: int, ctx: int, null_stream: int) -> bool:
        return bool(self._lib.tph_context(self._handle(), dev, ctx, null_stream))

    def device(self, dev: int, name: str | bytes, *, uuid: bytes | None = None, sm_count: int | None = None,
               compute_capability: tuple[int, int] | None = None) -> bool:
        """A DEVICE record; with any of its facts given, written with them (the others 0: unknown)."""
        if uuid is None and sm_count is None and compute_capability is None:
            return bool(self._lib.tph_device(self._handle(), dev, _b(name)))
        if uuid is not None and len(uuid) != 16:
            raise ValueError("a device uuid is 16 bytes")
        major, minor = compute_capability or (0, 0)
        return bool(self._lib.tph_device_facts(self._handle(), dev, _b(name), uuid, sm_count or 0, major, minor))

    def clock_sync(self, cupti_ns: int, wall_ns: int) -> bool:
        return bool(self._lib.tph_clock_sync(self._handle(), cupti_ns, wall_ns))

    # -- header --------------------------------------------------------------------------
    def set_status(self, status: int, detail: str | bytes = "") -> None:
        self._lib.tph_set_status(self._handle(), status, _b(detail))

    def add_cupti_dropped(self, n: int) -> None:
        self._lib.tph_add_cupti_dropped(self._handle(), n)

    def mark_exited(self) -> None:
        self._lib.tph_mark_exited(self._handle())

    @property
    def head(self) -> int:
        return int(self._lib.tph_head(self._handle()))

    @property
    def tail(self) -> int:
        return int(self._lib.tph_tail(self._handle()))

    @property
    def dropped(self) -> int:
        return int(self._lib.tph_dropped(self._handle()))

    @property
    def incomplete(self) -> int:
        return int(self._lib.tph_incomplete(self._handle()))

    @property
    def header(self) -> RingHeader:
        """A live view of the mapped header (invalid after close())."""
        return RingHeader.from_address(self._lib.tph_header(self._handle()))

    # -- malformed-input helpers -----------------------------------------------------------
    def push_raw(self, record: bytes) -> bool:
        """Publish an arbitrary 64-byte record at the head, like a real one (drops if full)."""
        return bool(self._lib.tph_push_raw(self._handle(), _raw64(record)))

    def write_raw(self, slot: int, record: bytes) -> None:
        """Overwrite ring slot ``slot`` (taken modulo capacity) without publishing anything."""
        self._lib.tph_write_slot(self._handle(), slot, _raw64(record))

    def set_head(self, head: int) -> None:
        """Publish an arbitrary head (e.g. past slots never written: torn records)."""
        self._lib.tph_set_head(self._handle(), head)

    def corrupt_header(self, *, magic: int | None = None, version: int | None = None,
                       record_size: int | None = None, capacity: int | None = None,
                       header_size: int | None = None) -> None:
        """Overwrite header fields in place (the producer keeps using its own copies)."""
        hdr = self.header
        for field, value in (("magic", magic), ("version", version),
                             ("record_size", record_size), ("capacity", capacity),
                             ("header_size", header_size)):
            if value is not None:
                setattr(hdr, field, value)

    def close(self) -> int:
        """Unmap the ring and close its memory file (an agent's mapping stays valid). Returns 0 or
        -errno."""
        if not self._h:
            return 0
        rc = int(self._lib.tph_close(self._h))
        self._h = None
        return rc

    def __enter__(self) -> "RingProducer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle(self) -> int:
        if not self._h:
            raise ValueError(f"the ring of pid {self.pid} is closed")
        return self._h


class Courier:
    """A process of its own that hands ``producer``'s ring to the agent at ``socket_path`` and
    then lives until :meth:`exit` or :meth:`kill` (tests/support/ring_courier.c)."""

    def __init__(self, lib_path: str | os.PathLike[str], producer: RingProducer,
                 socket_path: str | os.PathLike[str]) -> None:
        fd = producer.fd
        courier = Path(lib_path).with_name(COURIER_NAME)
        self.proc = subprocess.Popen([str(courier), os.fspath(socket_path), str(fd)], pass_fds=(fd,),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid
        line = self.proc.stdout.readline().split()
        if line[:1] != ["handed"]:
            self.proc.wait(timeout=10)
            code = int(line[1]) if len(line) > 1 else 0
            raise OSError(code, f"the courier could not hand the ring over: {os.strerror(code) if code else line}")

    def exit(self, status: int = 0) -> int:
        """End with ``status``; return the status it ended with."""
        self.proc.communicate(f"{status}\n", timeout=10)
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdin.close()
        self.proc.stdout.close()

    def running(self) -> bool:
        return self.proc.poll() is None


def _raw64(record: bytes) -> bytes:
    if len(record) != RECORD_SIZE:
        raise ValueError(f"a raw record is {RECORD_SIZE} bytes, got {len(record)}")
    return bytes(record)


def pack_record(rtype: int, flags: int = 0, device: int = 0, start: int = 0, end: int = 0,
                context: int = 0, stream: int = 0, payload: bytes = b"") -> bytes:
    """Build a raw 64-byte record: the 32-byte common part plus up to 32 payload bytes."""
    head = struct.pack("<HHIQQII", rtype, flags, device, start, end, context, stream)
    if len(payload) > 32:
        raise ValueError("payload is at most 32 bytes")
    return head + payload.ljust(32, b"\0")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/support/ringproducer.py DIR (builds the test producer into DIR, "
                 "prints the library's path)")
    print(build_producer(sys.argv[1]))
