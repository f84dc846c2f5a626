"""A collector plugin for tests: one GPU held by one real process of this machine, described the way
the NVML collector describes a process (gpuflow.collectors.nvml.procinfo: the name from
/proc/<pid>/comm, the command line from /proc/<pid>/cmdline, redacted to argv[0]'s first word).

A test starts a process that rewrote its own title (argv[0] and comm), then an agent with
``--plugin titled_process`` and ``GPUFLOW_TEST_TITLED_PID=<pid>`` (tests/support on PYTHONPATH:
child_env.with_support), and looks at what the page makes of that title.

Constraints: reads /proc only; no thread; the part is rebuilt on every call.
"""

from __future__ import annotations

import os

from gpuflow import hookimpl
from gpuflow.collectors.nvml.procinfo import LinuxProcReader, describe_cmdline
from gpuflow.core.snapshot import Attachment, Device, HostInfo, Process, SnapshotPart

SOURCE = "titled"
UUID = "GPU-00000000-0000-4000-8000-7171ed000000"
_reader = LinuxProcReader()


@hookimpl
def produce_snapshot(context) -> SnapshotPart:
    pid = int(os.environ["GPUFLOW_TEST_TITLED_PID"])
    facts = _reader.read(pid)
    processes = ()
    if facts is not None:
        processes = (Process(pid=pid, name=facts.name, user=facts.user,
                             cmdline=describe_cmdline(facts.argv, context.config.show_cmdline),
                             attachments=(Attachment(device_index=0, device_uuid=UUID,
                                                     memory_used_bytes=1 << 30, sm_util_pct=50.0),)),)
    return SnapshotPart(source=SOURCE, host=HostInfo(hostname="titledhost"),
                        devices=(Device(index=0, uuid=UUID, name="Titled GPU", memory_used_bytes=1 << 30,
                                        memory_total_bytes=8 << 30),),
                        processes=processes)
