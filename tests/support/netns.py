"""A network namespace joined to the test's own by a veth pair, for partition tests.

:func:`veth_namespace` makes a namespace of its own (a random name), a veth pair with one end in
it, a /30 of 10.254.0.0/16 between the two ends (both up, the namespace's loopback too), and
yields a :class:`Netns`: :meth:`Netns.partition` takes the test's end of the link down (every
packet between the two sides is lost, as in a network partition; no socket is told), and
:meth:`Netns.heal` brings it back. Leaving the ``with`` deletes the namespace (which deletes the
veth pair), whatever happened; a process started in it must be ended first.

Making a namespace needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and ``ip`` (iproute2): without
them the calling test skips with the reason, except under CI, which runs as root with iproute2
installed by ``.ci/run``: there it fails, so that a partition test never passes as skipped.

Constraints: every ``ip`` command has a timeout; names are random, so tests never collide.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from typing import Iterator

import pytest

IP_S = 10


class IpError(RuntimeError):
    """An ``ip`` command failed; its message is ip's own."""


def ip(*args: str) -> None:
    """``ip ARGS``; IpError (with ip's own message) when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_S)
    if done.returncode:
        raise IpError(f"ip {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")


@dataclass(frozen=True)
class Netns:
    name: str
    outer_link: str   #: the veth end in the test's namespace
    outer_address: str
    inner_address: str   #: the veth end's address inside the namespace

    @property
    def exec_prefix(self) -> tuple[str, ...]:
        """What runs a command inside the namespace (``ip netns exec`` execs it: same process)."""
        return ("ip", "netns", "exec", self.name)

    def partition(self) -> None:
        ip("link", "set", self.outer_link, "down")

    def heal(self) -> None:
        ip("link", "set", self.outer_link, "up")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but a network namespace cannot be made: {reason}")
    pytest.skip(f"a network namespace cannot be made: {reason}")


@contextlib.contextmanager
def veth_namespace() -> Iterator[Netns]:
    if shutil.which("ip") is None:
        _unavailable("ip (iproute2) is not installed")
    tag = secrets.token_hex(3)
    name, outer, inner = f"gpuflow-{tag}", f"gfo{tag}", f"gfi{tag}"
    block = secrets.randbelow(1 << 14) * 4   # a /30 of 10.254.0.0/16
    outer_address = f"10.254.{block >> 8}.{(block & 0xFF) + 1}"
    inner_address = f"10.254.{block >> 8}.{(block & 0xFF) + 2}"
    try:
        ip("netns", "add", name)
    except IpError as exc:
        _unavailable(f"{exc} (root, or CAP_NET_ADMIN, is needed)")
    try:
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        ip("link", "set", inner, "netns", name)
        ip("addr", "add", f"{outer_address}/30", "dev", outer)
        ip("link", "set", outer, "up")
        ip("netns", "exec", name, "ip", "addr", "add", f"{inner_address}/30", "dev", inner)
        ip("netns", "exec", name, "ip", "link", "set", inner, "up")
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield Netns(name, outer, outer_address, inner_address)
    finally:
        subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=IP_S)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=IP_S)
