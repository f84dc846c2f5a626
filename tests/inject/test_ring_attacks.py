"""Another local user against a victim's `gpuflow run`: the attacks of issue 15 on the rings.

The victim is an unprivileged user running the real `gpuflow run` (other_user.Victim) on a
compiled stand-in program (traced_stub.c) that loads the packaged libgpuflow_inject.so, which
records the fake libcupti's scripted batch (13 kernel launches a process). The attacker is a child
of the test dropped to uid 65534, with nothing but what any local user has: it can list and
create files in /dev/shm, read /proc, and learn the session id the victim's terminal shows.
Before the ring transport stopped trusting names, each attack below succeeded:

* a fake traced process (names and kernels of the attacker's choosing) in the victim's view;
* the ring name of the victim's next traced process taken first (it ran untraced, the
  attacker's data shown under its pid);
* the victim's view frozen by a foreign ring that ends (the agent could not unlink it and failed
  every pass from then on);
* the agent killed by SIGBUS by truncating a ring it had mapped;
* every `gpuflow run` hung at start by a FIFO under a ring-like name;
* the live view stalled for seconds per pass by tens of thousands of empty ring-named files.

Each test asserts what must hold for the victim: only its own processes, with exact counts, a run
that ends with the program's status, a live view that keeps up.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from other_user import ATTACKER_UID, Victim, as_user, can_play_users, shared_dir, wait_child
from ringfuzz import Case, kernel, name_chunks

from inject_lib import FAKE_CUPTI_C, ROOT, cuda_include_dir

pytestmark = pytest.mark.skipif(not can_play_users(), reason="needs root to play two other users")

PER_PROCESS = {"_Z6kernelPf": 7, "_Z7softmaxIfLi128EEvPT_ii": 5, "_Z4latev": 1}
ATTACKER_KERNEL = "_Z8attackerv"
SHM = "/dev/shm"
DEAD_PID = 4_100_000   # above any pid_max default: no process has it


@pytest.fixture(scope="module")
def world():
    """A folder both users read: the stand-in program, the fake libcupti; the victim's environment."""
    headers = cuda_include_dir()
    if headers is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no CUPTI/CUDA headers were found (set CUDA_HOME)")
        pytest.skip("no CUPTI/CUDA headers (set CUDA_HOME)")
    folder = shared_dir()
    stub, cupti = folder / "traced_stub", folder / "libcupti_fake.so"
    for cmd in (["gcc", "-O2", str(ROOT / "tests/support/traced_stub.c"), "-o", str(stub), "-ldl"],
                ["gcc", "-shared", "-fPIC", "-pthread", "-O2", "-std=c11", f"-I{headers}",
                 str(FAKE_CUPTI_C), "-o", str(cupti)]):
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    for path in (stub, cupti):
        path.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder),
           "GPUFLOW_CUPTI_PATH": str(cupti), "GPUFLOW_DISABLED_PLUGINS": "nvml",
           "GPUFLOW_DISABLE_PLUGIN_AUTOLOAD": "1", "FAKE_CUPTI_KERNELS": "10"}
    yield folder, stub, env
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def run_dir(world):
    folder = Path(world[0]) / f"run-{time.monotonic_ns()}"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


@pytest.fixture(autouse=True)
def packaged_library():
    from gpuflow.collectors.cupti.injection import inject_library_path
    if inject_library_path() is None:
        if os.environ.get("CI"):
            pytest.fail("CI must build the packaged injection library")
        pytest.skip("the packaged injection library was not built")


def launches(doc: dict) -> dict[int, dict[str, int]]:
    """Kernel launches per traced pid, by mangled name."""
    out: dict[int, dict[str, int]] = {}
    for t in doc["traced"]:
        for k in t["kernels"]:
            out.setdefault(t["pid"], {})[k["mangled"]] = out.get(t["pid"], {}).get(k["mangled"], 0) + k["count"]
    return out


def program_pids(victim: Victim, count: int) -> list[int]:
    """The pids of the stand-in programs that have called InitializeInjection (they print it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = [int(p) for p in re.findall(r"stub (\d+) init", victim.stderr)]
        if len(pids) >= count:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"the programs did not start:\n{victim.stderr}")


def forged_ring(pid: int, *, exited: bool) -> bytes:
    """A well-formed ring (any local user can write one: the format is public) whose only kernel
    is the attacker's."""
    records = name_chunks(1, ATTACKER_KERNEL.encode()) + [kernel(1, start=10 + i, end=20 + i) for i in range(5)]
    case = Case(records=records, header={"producer_pid": pid, "producer_exited": int(exited)})
    return bytes(case.build())


def plant(path: str, data: bytes) -> None:
    """As the attacker: create ``path`` readable and writable by everyone (so any agent maps it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        os.fchmod(fd, 0o666)
        os.write(fd, data)
    finally:
        os.close(fd)


def attacker(action, *args, timeout: float = 60) -> int:
    """Run ``action`` as the attacker and wait for it; its exit code."""
    code = wait_child(as_user(ATTACKER_UID, action, *args), timeout)
    assert code == 0, f"the attacker's own code failed ({code})"
    return code


def remove_planted(session: str | None, *names: str) -> None:
    paths = [os.path.join(SHM, n) for n in names]
    if session:
        paths += glob.glob(os.path.join(SHM, f"gpuflow-{session}-*"))
    for path in paths:
        try:
            if stat.S_ISFIFO(os.lstat(path).st_mode):
                release_fifo_readers(path)
            os.unlink(path)
        except FileNotFoundError:
            pass


def release_fifo_readers(path: str) -> None:
    """Open a FIFO for writing and close it, so that every reader blocked on it gets EOF."""
    for _ in range(50):
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return   # ENXIO: nobody is blocked reading it
        time.sleep(0.01)


def finish(victim: Victim, timeout: float = 60) -> int | None:
    status = victim.wait(timeout)
    return status


def assert_only_the_programs(victim: Victim, status: int | None, pids: list[int]) -> None:
    assert status == 0, f"gpuflow run ended with {status}:\n{victim.stderr}"
    doc = victim.summary
    assert ATTACKER_KERNEL not in json.dumps(doc)
    assert launches(doc) == {pid: PER_PROCESS for pid in pids}, victim.stderr
    assert all(not t["truncated"] for t in doc["traced"]), victim.stderr


def test_another_user_cannot_put_a_fake_process_into_a_victims_run(world, run_dir):
    folder, stub, env = world
    victim = Victim(run_dir, [str(stub), "0", "1500"], env)
    victim.start()
    victim.go()
    session = intruder = None
    try:
        session = victim.session
        (program,) = program_pids(victim, 1)

        def pose_as_a_traced_process(session: str) -> None:
            # a ring under the session's name pattern, for a process that runs: the attacker's own
            plant(os.path.join(SHM, f"gpuflow-{session}-{os.getpid()}"), forged_ring(os.getpid(), exited=False))
            time.sleep(30)

        intruder = as_user(ATTACKER_UID, pose_as_a_traced_process, session)
        status = finish(victim)
    finally:
        if intruder:
            os.kill(intruder, signal.SIGKILL)
            wait_child(intruder, 10)
        remove_planted(session)
    assert_only_the_programs(victim, status, [program])


def test_another_user_cannot_take_the_ring_of_a_victims_next_process(world, run_dir):
    folder, stub, env = world
    # the program starts a second traced process that initialises CUDA 0.8 s after it starts
    victim = Victim(run_dir, [str(stub), "0", "1500", "1", "800"], env)
    victim.start()
    victim.go()
    session = None
    try:
        session = victim.session
        (program,) = program_pids(victim, 1)

        def take_next(session: str, parent: int) -> None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                for entry in os.listdir("/proc"):
                    if not entry.isdigit():
                        continue
                    try:
                        with open(f"/proc/{entry}/stat", "rb") as fh:
                            fields = fh.read().rsplit(b")", 1)[1].split()
                    except OSError:
                        continue
                    if int(fields[1]) == parent:   # the victim's next process, before its cuInit
                        plant(os.path.join(SHM, f"gpuflow-{session}-{entry}"),
                              forged_ring(int(entry), exited=False))
                        return
                time.sleep(0.005)
            raise AssertionError("the victim's program started no child")

        attacker(take_next, session, program)
        pids = program_pids(victim, 2)
        status = finish(victim)
    finally:
        remove_planted(session)
    assert_only_the_programs(victim, status, pids)


def test_a_foreign_ring_that_ends_cannot_freeze_the_victims_view(world, run_dir):
    folder, stub, env = world
    # the program's own cuInit comes after the foreign ring has ended
    victim = Victim(run_dir, [str(stub), "1000", "1000"], env)
    victim.start()
    victim.go()
    session = None
    try:
        session = victim.session
        attacker(lambda: plant(os.path.join(SHM, f"gpuflow-{session}-{DEAD_PID}"),
                               forged_ring(DEAD_PID, exited=True)))
        (program,) = program_pids(victim, 1)
        status = finish(victim)
    finally:
        remove_planted(session)
    assert_only_the_programs(victim, status, [program])
    assert "failed" not in victim.stderr


def test_truncating_a_ring_cannot_kill_the_victims_agent(world, run_dir):
    folder, stub, env = world
    victim = Victim(run_dir, [str(stub), "0", "2000"], env)
    victim.start()
    victim.go()
    session = None
    try:
        session = victim.session
        (program,) = program_pids(victim, 1)

        def truncate_once_mapped(session: str) -> None:
            path = os.path.join(SHM, f"gpuflow-{session}-{os.getpid()}")
            plant(path, forged_ring(os.getpid(), exited=False))
            time.sleep(0.5)    # the victim's agent drains every 20 ms: it has mapped it by now
            os.truncate(path, 0)
            time.sleep(1.0)

        attacker(truncate_once_mapped, session)
        status = finish(victim)
    finally:
        remove_planted(session)
    assert status != -signal.SIGBUS, "the victim's agent died of SIGBUS"
    assert_only_the_programs(victim, status, [program])


def test_a_fifo_under_a_ring_name_cannot_hang_gpuflow_run(world, run_dir):
    folder, stub, env = world
    fifo = f"gpuflow-fifo{os.getpid()}-{DEAD_PID + 1}"
    victim = Victim(run_dir, [str(stub), "0", "200"], env)
    victim.start()
    try:
        attacker(lambda: os.mkfifo(os.path.join(SHM, fifo), 0o666))
        victim.go()
        status = finish(victim, timeout=20)
    finally:
        remove_planted(None, fifo)
    assert status is not None, "gpuflow run hung at start on a FIFO under a ring name"
    (program,) = program_pids(victim, 1)
    assert_only_the_programs(victim, status, [program])


def kernel_counts_over_time(port: int, pid: int, seconds: float) -> list[tuple[float, int]]:
    """(time, launches of the program so far) from /api/snapshot, every 50 ms."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/snapshot", timeout=5) as answer:
                doc = json.load(answer)
            count = sum(k["count"] for t in doc["traced"] if t["pid"] == pid for k in t["kernels"])
            seen.append((time.monotonic(), count))
        except OSError:
            pass
        time.sleep(0.05)
    return seen


def test_many_ring_named_files_cannot_stall_the_live_view(world, run_dir):
    folder, stub, env = world
    # a program that keeps finishing kernels: one CUPTI buffer of one kernel every 100 ms for 6 s
    victim = Victim(run_dir, [str(stub), "0", "7000"],
                    {**env, "FAKE_CUPTI_WORKER": "60", "FAKE_CUPTI_WORKER_GAP_MS": "100"})
    victim.start()
    victim.go()
    session = None
    try:
        session = victim.session
        port = victim.port
        (program,) = program_pids(victim, 1)

        def flood(session: str) -> None:
            for n in range(30_000):
                os.close(os.open(os.path.join(SHM, f"gpuflow-{session}-{DEAD_PID + 10 + n}"),
                                 os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))

        attacker(flood, session)
        seen = kernel_counts_over_time(port, program, 4.0)
        status = finish(victim)
    finally:
        remove_planted(session)
    assert status == 0, victim.stderr
    changes = [t for (t, n), (_, before) in zip(seen[1:], seen) if n != before]
    gaps = [b - a for a, b in zip(changes, changes[1:])]
    assert len(changes) >= 10 and max(gaps) < 1.0, f"the view stalled: {len(changes)} changes, gaps {gaps}"


def test_another_user_cannot_reach_the_victims_ring_socket(world, run_dir):
    """What the rings are now: nothing in /dev/shm, a socket in a directory only the victim can
    enter. The attacker finds the directory (its name is visible in /tmp) and tries to connect."""
    folder, stub, env = world
    victim = Victim(run_dir, [str(stub), "0", "1500"], env)
    victim.start()
    victim.go()
    (program,) = program_pids(victim, 1)
    attempts = run_dir / "attempts"

    def knock_on_every_ring_socket() -> None:
        import socket
        assert not [n for n in os.listdir(SHM) if n.startswith("gpuflow-")], "a ring has a name again"
        tried = []
        for base in ("/tmp", os.environ.get("TMPDIR", "/tmp")):
            for entry in os.listdir(base):
                if not re.fullmatch(r"gpuflow-[0-9a-f]{16}", entry):   # the agents' directories
                    continue
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                try:
                    s.connect(os.path.join(base, entry, "ring.sock"))
                    raise AssertionError(f"connected to {base}/{entry}/ring.sock")
                except PermissionError:
                    tried.append(entry)
                except FileNotFoundError:   # another agent's (a test beside this one), gone meanwhile
                    pass
                finally:
                    s.close()
        with open(attempts, "w") as fh:
            fh.write(" ".join(tried))

    attacker(knock_on_every_ring_socket)
    status = finish(victim)
    assert attempts.read_text(), "the attacker found no ring socket directory to try"
    assert_only_the_programs(victim, status, [program])
