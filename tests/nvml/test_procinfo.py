"""Process identity from /proc: name, user, redacted command line; vanished pids."""

from __future__ import annotations

import doctest
import os
import pwd
import subprocess
import sys
import time

from gpuflow.collectors.nvml import procinfo
from gpuflow.collectors.nvml.procinfo import LinuxProcReader, describe_cmdline, user_name


def fake_proc(root, pid, comm=b"trainer\n", cmdline=b"python\0train.py\0--token=x\0"):
    d = root / str(pid)
    d.mkdir()
    if comm is not None:
        (d / "comm").write_bytes(comm)
    if cmdline is not None:
        (d / "cmdline").write_bytes(cmdline)
    return d


def test_reads_name_user_and_argv(tmp_path):
    fake_proc(tmp_path, 41)
    facts = LinuxProcReader(str(tmp_path)).read(41)
    assert facts.name == "trainer"
    assert facts.user == pwd.getpwuid(os.getuid()).pw_name
    assert facts.argv == ("python", "train.py", "--token=x")


def test_missing_pid_is_vanished(tmp_path):
    assert LinuxProcReader(str(tmp_path)).read(42) is None


def test_pid_that_leaves_between_reads_is_vanished(tmp_path):
    fake_proc(tmp_path, 43, cmdline=None)  # comm read fine, cmdline already gone
    assert LinuxProcReader(str(tmp_path)).read(43) is None


def test_kernel_thread_has_no_cmdline(tmp_path):
    fake_proc(tmp_path, 44, comm=b"kworker/0:1\n", cmdline=b"")
    facts = LinuxProcReader(str(tmp_path)).read(44)
    assert facts.name == "kworker/0:1" and facts.argv is None


def test_real_proc_of_a_child_and_after_it_exits():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 5
        while (facts := LinuxProcReader().read(child.pid)).argv is None and time.monotonic() < deadline:
            time.sleep(0.01)  # between fork and exec the child has no command line yet
        assert facts.argv[1:] == ("-c", "import sys; sys.stdin.read()")
        assert facts.name and facts.name in os.path.basename(sys.executable)
    finally:
        child.communicate(b"")
    assert LinuxProcReader().read(child.pid) is None  # reaped: gone from /proc


def test_unknown_uid_is_shown_as_a_number():
    assert user_name(2**31 - 7) == str(2**31 - 7)


def test_redaction():
    assert describe_cmdline(("python", "train.py", "--token=abc"), False) == "python"
    assert describe_cmdline(("/usr/bin/python3", "-m", "x"), False) == "/usr/bin/python3"
    assert describe_cmdline(("nginx: worker process --secret",), False) == "nginx:"
    assert describe_cmdline(("python", "a b"), True) == "python a b"
    assert describe_cmdline(None, False) is None and describe_cmdline((), True) is None
    assert describe_cmdline(("  ",), False) is None


def test_doctests():
    assert doctest.testmod(procinfo).failed == 0


def test_facts_follow_the_bytes_of_the_same_pid(tmp_path):
    d = fake_proc(tmp_path, 45)
    reader = LinuxProcReader(str(tmp_path))
    first = reader.read(45)
    assert reader.read(45) is first  # same bytes: the facts are not decoded again
    (d / "cmdline").write_bytes(b"python\0serve.py\0")  # the pid was reused, or setproctitle
    (d / "comm").write_bytes(b"server\n")
    second = reader.read(45)
    assert (second.name, second.argv) == ("server", ("python", "serve.py"))
    (d / "cmdline").unlink()
    assert reader.read(45) is None  # gone is gone, whatever was read before
