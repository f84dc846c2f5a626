"""The hub's credentials file: the bearer token for each agent, never on the command line.

A JSON object from a target (``host:port`` as in the targets file, or its URL) to the token that
agent wants; the key ``*`` gives the token of every target not named::

    {"gpu-node-1:7717": "Zq…", "*": "k3…"}

The file is judged as an agent judges its own token file (gpuflow.transport.tokens): a regular
file of the user running the hub, no access for group or others (``chmod 600``), at most
:data:`MAX_FILE_BYTES`; each token has the token's form (printable ASCII, no spaces, at most
1,024 characters). A token is sent only in the ``Authorization`` header of requests to its own
target (the hub follows no redirect). Errors never show a token.

The hub reads the file when it starts and again whenever it changes (:class:`CredentialsFile`:
its size, times, inode or mode, looked at every second), so a rotated token reaches its agent at
that link's next dial without a restart. A new version is judged as the first was (the same
ownership and mode checks, every time): one that cannot be used keeps the tokens read before and
says so in one line until a good version comes.

Constraints: pure but for reading the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Mapping

from gpuflow.collectors.fleet.targets import Target, TargetError, parse_address, parse_url
from gpuflow.transport.tokens import TokenError, check_form, read_private_file

MAX_FILE_BYTES = 1024 * 1024
ANY = "*"


@dataclass(frozen=True)
class Credentials:
    """Tokens by target address (``host:port``), and the one for every other target."""

    by_address: Mapping[str, str] = field(default_factory=dict)
    default: str | None = None

    def token_for(self, target: Target) -> str | None:
        return self.by_address.get(target.address, self.default)

    def __repr__(self) -> str:   # never the tokens
        return f"Credentials({len(self.by_address)} targets, default={'set' if self.default else 'none'})"


def parse_credentials(raw: bytes, where: str) -> Credentials:
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValueError(f"{where}: not JSON") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object from target (host:port) to token")
    by_address: dict[str, str] = {}
    default = None
    for i, (key, token) in enumerate(doc.items()):
        at = f"{where}: entry {i + 1}"
        if not isinstance(token, str):
            raise ValueError(f"{at}: a token is text")
        try:
            check_form(token, f"{at}: the token")
        except TokenError as exc:
            raise ValueError(str(exc)) from None
        if key == ANY:
            default = token
            continue
        try:
            target = parse_url(key, at) if "://" in key else parse_address(key, "http", at)
        except TargetError as exc:
            raise ValueError(str(exc)) from None
        by_address[target.address] = token
    return Credentials(by_address, default)


def read_credentials(path: str, where: str = "credentials file") -> Credentials:
    """The credentials in ``path``; ValueError (one line, no token in it) when it cannot be used."""
    try:
        raw = read_private_file(path, where, MAX_FILE_BYTES)
    except TokenError as exc:
        raise ValueError(str(exc)) from None
    return parse_credentials(raw, f"{where} {path}")


class CredentialsFile:
    """The credentials of ``path`` as last read well, read again when the file changes.

    :meth:`token_for` answers from the last good version; :meth:`check` looks at the file (one
    ``stat``) and reads it again when its stamp changed, judging the new version whole: taken, or
    refused with :attr:`problem` set (and the tokens before kept).
    """

    def __init__(self, path: str, where: str = "credentials file") -> None:
        self.path, self.where = path, "credentials file"
        self.problem: str | None = None
        self._stamp = _stamp(path)
        self.current = read_credentials(path, where)   # the first reading must be good (ValueError)

    def token_for(self, target: Target) -> str | None:
        return self.current.token_for(target)

    def check(self) -> bool:
        """Read the file again if it changed; whether the tokens or the problem changed."""
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            fresh = read_credentials(self.path, self.where)
        except ValueError as exc:
            problem = f"{exc}; the tokens read before are kept"
            changed, self.problem = problem != self.problem, problem
            return changed
        self.current, self.problem = fresh, None
        return True

    def __repr__(self) -> str:   # never the tokens
        return f"CredentialsFile({self.current!r}, problem={'yes' if self.problem else 'no'})"


def _stamp(path: str) -> tuple[int, ...] | None:
    """What says the file changed: its inode, size, modification and change times, mode and owner
    (a chmod alone changes the change time), or None when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid)
