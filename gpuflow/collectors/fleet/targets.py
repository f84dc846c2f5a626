"""What a hub dials: targets from ``--target URL`` and from a Prometheus ``file_sd`` file.

A target is an agent's base URL: ``http`` or ``https``, a host (a DNS name or an IP literal), a
port (the scheme's default when the URL names none), and a path prefix (``/`` unless the agent
sits behind a proxy path). No user information, query or fragment: credentials come from the
credentials file only (:mod:`gpuflow.collectors.fleet.credentials`), never from a URL, which
every local user can read on a command line.

The targets file is what Prometheus reads with ``file_sd_configs``, so one inventory feeds both::

    [{"targets": ["gpu-node-1:7717", "gpu-node-2:7717"], "labels": {"__scheme__": "https"}}]

Each group's ``__scheme__`` label (``http`` when absent) applies to its targets; other labels
are Prometheus's business and are ignored here. A file is read whole (at most
:data:`MAX_FILE_BYTES`, a regular file, opened without blocking) and checked whole: a file with
one bad entry is refused with a line naming the entry's place, never half used. At most
``max_targets`` targets in all (the hub's ``max_hosts``).

Constraints: pure but for reading the file; every error is one line (:class:`TargetError`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import urlsplit

#: the largest targets file read (about 40,000 targets)
MAX_FILE_BYTES = 4 * 1024 * 1024
SCHEMES = {"http": 80, "https": 443}
_DNS_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_-]{1,63})*\.?")
_PATH = re.compile(r"/[A-Za-z0-9._~/-]*")


class TargetError(ValueError):
    """A target, or a targets file, that cannot be used; one line."""


@dataclass(frozen=True, order=True)
class Target:
    """One agent's base URL, normalised (lower-case scheme and name, explicit port, path ending in /)."""

    scheme: str
    host: str  #: a lower-case DNS name or an IP literal (IPv6 without brackets)
    port: int
    path: str = "/"

    @property
    def address(self) -> str:
        """``host:port`` as Prometheus writes a target (IPv6 bracketed)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The base URL: ``scheme://host:port/path/``."""
        return f"{self.scheme}://{self.address}{self.path}"

    @property
    def fallback_name(self) -> str:
        """A host name made of the address, for an agent that names no host of its own (and for
        the target until it has said its name): ``gpu-node-1_7717``, ``10.0.0.5_7717``."""
        return re.sub(r"[^A-Za-z0-9._-]", "-", self.host).lstrip(".-") + f"_{self.port}"


def check_host(host: str, where: str) -> str:
    """A DNS name or an IP literal, lower-case; TargetError otherwise."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if not _DNS_NAME.fullmatch(host):
        raise TargetError(f"{where}: the host is neither a DNS name nor an IP address")
    return host.lower().rstrip(".")


def parse_url(text: str, where: str = "target") -> Target:
    """``http(s)://host[:port][/path]`` as a Target; TargetError saying what is wrong."""
    if not isinstance(text, str) or not text or len(text) > 2048:
        raise TargetError(f"{where}: expected a URL such as http://gpu-node-1:7717/")
    if any(c.isspace() or ord(c) < 0x21 or ord(c) > 0x7E for c in text):
        raise TargetError(f"{where}: a URL holds no spaces or control characters")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise TargetError(f"{where}: not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise TargetError(f"{where}: the scheme must be http or https")
    if parts.username is not None or parts.password is not None:
        raise TargetError(f"{where}: no credentials in a URL (command lines are readable by every "
                          "user): put the token in the credentials file")
    if parts.query or parts.fragment or "?" in text or "#" in text:
        raise TargetError(f"{where}: no query or fragment in an agent's URL")
    if not parts.hostname:
        raise TargetError(f"{where}: the URL names no host")
    path = parts.path or "/"
    if not _PATH.fullmatch(path) or "//" in path or "/../" in path + "/" or "/./" in path + "/":
        raise TargetError(f"{where}: the path may hold only letters, digits and . _ ~ - /")
    return Target(scheme, check_host(parts.hostname, where), port or SCHEMES[scheme],
                  path if path.endswith("/") else path + "/")


def parse_address(text: Any, scheme: str, where: str) -> Target:
    """A file_sd target, ``host:port`` (``[v6]:port``), with the group's scheme."""
    if not isinstance(text, str) or "/" in text or "@" in text:
        raise TargetError(f"{where}: a target is host:port")
    target = parse_url(f"{scheme}://{text}", where)
    if not re.search(r":\d+$", text):
        raise TargetError(f"{where}: a target is host:port (the port is missing)")
    return target


def parse_file_sd(raw: bytes, where: str, max_targets: int) -> tuple[Target, ...]:
    """Every target of a file_sd document, in order, each once; TargetError for a bad one."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise TargetError(f"{where}: not JSON") from None
    if not isinstance(doc, list):
        raise TargetError(f"{where}: expected a list of target groups (Prometheus file_sd)")
    found: dict[Target, None] = {}
    for g, group in enumerate(doc):
        at = f"{where}: group {g + 1}"
        if not isinstance(group, dict) or not isinstance(group.get("targets"), list):
            raise TargetError(f"{at}: expected {{\"targets\": [...], \"labels\": {{...}}}}")
        labels = group.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise TargetError(f"{at}: labels must map names to text")
        scheme = labels.get("__scheme__", "http")
        if scheme not in SCHEMES:
            raise TargetError(f"{at}: __scheme__ must be http or https")
        for t, text in enumerate(group["targets"]):
            found[parse_address(text, scheme, f"{at}, target {t + 1}")] = None
            if len(found) > max_targets:
                raise TargetError(f"{where}: more than {max_targets} targets (the hub's most hosts)")
    return tuple(found)


def read_small_file(path: str, where: str, limit: int) -> bytes:
    """A regular file's bytes, at most ``limit``; opened without blocking (a FIFO swapped in
    cannot hang the hub) and judged on the open descriptor. TargetError otherwise."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise TargetError(f"{where} {path}: not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise TargetError(f"{where} {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TargetError(f"{where} {path}: not a regular file")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise TargetError(f"{where} {path}: larger than {limit} bytes")
            chunks.append(chunk)
    except OSError as exc:
        raise TargetError(f"{where} {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def read_targets_file(path: str, max_targets: int, where: str = "targets file") -> tuple[Target, ...]:
    return parse_file_sd(read_small_file(path, where, MAX_FILE_BYTES), f"{where} {path}", max_targets)


def unique(targets: Iterable[Target]) -> tuple[Target, ...]:
    return tuple(dict.fromkeys(targets))
