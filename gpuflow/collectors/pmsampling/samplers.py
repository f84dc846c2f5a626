"""Starting, watching and stopping the sampler helpers (gpuflow-pm-sampler, one per GPU).

Each helper is a child of the agent with the agent's environment less its token, standard input
closed, standard output discarded and standard error on a pipe of which at most
:data:`STDERR_KEPT` bytes are kept (the helper writes one line there, only when it cannot hand its
ring over). It ends with the agent (``PR_SET_PDEATHSIG`` in the helper), when the agent closes its
connection (the normal stop, which lets it decode its last samples), or, if it has not ended
:data:`STOP_WAIT_S` after that, by SIGTERM and then SIGKILL.

Constraints: never blocks for long: a pass reads what the pipes hold without waiting; a stop waits
at most STOP_WAIT_S + KILL_WAIT_S for all helpers together.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

STDERR_KEPT = 1024
STOP_WAIT_S = 2.0
KILL_WAIT_S = 1.0
#: the agent's variables a helper must not see
_SECRET_PREFIXES = ("GPUFLOW_TOKEN",)


@dataclass
class SamplerSettings:
    """What every helper is started with."""

    binary: Path
    socket_path: Path
    interval_us: int
    ring_records: int
    decode_ms: int
    cuda_lib: str | None = None
    cupti_lib: str | None = None

    def command(self, device: int) -> list[str]:
        cmd = [str(self.binary), "--socket", str(self.socket_path), "--device", str(device),
               "--interval-us", str(self.interval_us), "--ring-records", str(self.ring_records),
               "--decode-ms", str(self.decode_ms)]
        if self.cuda_lib:
            cmd += ["--cuda-lib", self.cuda_lib]
        if self.cupti_lib:
            cmd += ["--cupti-lib", self.cupti_lib]
        return cmd


@dataclass
class Sampler:
    """One helper process and what it said."""

    device: int
    process: subprocess.Popen
    stderr: bytearray = field(default_factory=bytearray)
    exit_status: int | None = None
    handed_over: bool = False
    started: float = field(default_factory=time.monotonic)   #: its whole CPU time is since then

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        """Read what its stderr holds (bounded); its exit status once it has ended."""
        pipe = self.process.stderr
        if pipe is not None:
            try:
                while True:
                    chunk = pipe.read(4096)
                    if not chunk:
                        break
                    room = STDERR_KEPT - len(self.stderr)
                    if room > 0:
                        self.stderr += chunk[:room]
            except (BlockingIOError, InterruptedError, OSError, ValueError):
                pass
        if self.exit_status is None:
            code = self.process.poll()
            if code is not None:
                self.exit_status = code if code >= 0 else 128 - code
                if pipe is not None:
                    pipe.close()
        return self.exit_status

    def said(self) -> str:
        """Its stderr's first line, printable."""
        line = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()[:1]
        return "".join(c if c.isprintable() else "?" for c in (line[0] if line else ""))


def helper_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not k.startswith(_SECRET_PREFIXES)}


def start(settings: SamplerSettings, device: int, environ: Mapping[str, str]) -> Sampler:
    """Start the helper for ``device``; OSError when it cannot be started at all."""
    process = subprocess.Popen(settings.command(device), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=helper_environment(environ), close_fds=True,
                               start_new_session=True)
    assert process.stderr is not None
    flags = fcntl.fcntl(process.stderr.fileno(), fcntl.F_GETFL)
    fcntl.fcntl(process.stderr.fileno(), fcntl.F_SETFL, flags | os.O_NONBLOCK)
    return Sampler(device, process)


def stop_all(samplers: Sequence[Sampler], clock=time.monotonic) -> None:
    """Wait for helpers told to stop (their connections closed) to end; SIGTERM, then SIGKILL,
    those that do not."""
    for wait_s, sig in ((STOP_WAIT_S, signal.SIGTERM), (KILL_WAIT_S, signal.SIGKILL)):
        deadline = clock() + wait_s
        while clock() < deadline and any(s.poll() is None for s in samplers):
            time.sleep(0.02)
        for s in samplers:
            if s.poll() is None:
                try:
                    s.process.send_signal(sig)
                except ProcessLookupError:
                    pass
    for s in samplers:
        try:
            s.process.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
        s.poll()
