"""What must hold before the app serves, for ``gpuflow watch``/``run`` and gunicorn alike.

* **A bind other machines can reach needs a strong token** (:func:`exposure_error`): an address
  that is not loopback (``0.0.0.0``, ``::``, a LAN or public address) refuses to serve without
  a token, or with a weak one (gpuflow.transport.tokens.weakness), unless the explicit opt-out
  (``--insecure-no-auth`` / ``GPUFLOW_INSECURE_NO_AUTH=1``) is set, which
  :func:`exposure_warnings` then says loudly. The Host allow-list does not cover this: it stops
  DNS rebinding in browsers, while a direct client can send any Host. A Unix socket counts as
  local (its file's permissions decide who connects). The addresses are what the CLI binds, or
  what a gunicorn worker listens on (:func:`listening_addresses`, from its sockets, so
  ``--bind``, a config file and inherited descriptors all count).
* **The UI file is a regular file of bounded size** (:func:`check_ui_file`): opened without
  blocking, judged on the open descriptor, so ``--ui``/``GPUFLOW_UI`` naming a FIFO, a device
  (``/dev/zero``), a directory or a huge file stops the start with one line instead of hanging
  it or sending an endless page.

Constraints: each check returns or raises a one-line message that names the flag or variable
and never the token; nothing here logs or exits (the callers do, each in its own way).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from typing import Any, Iterable

from gpuflow.transport.settings import AppSettings
from gpuflow.transport.tokens import weakness

MAX_UI_BYTES = 4 << 20  #: the page is a few KiB; a custom one may be larger, not unbounded


class PreflightError(ValueError):
    """The app must not serve as configured; the message is one line for the user."""


def is_local_address(host: str) -> bool:
    """Loopback (``127.0.0.0/8``, ``::1``, ``localhost``) or a Unix socket (``unix:PATH``)."""
    if host == "localhost" or host.startswith("unix:"):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def exposure_error(addresses: Iterable[str], settings: AppSettings, token_hint: str,
                   opt_out: str) -> str | None:
    """Why serving on ``addresses`` with these settings is refused, or None.

    ``token_hint`` names the ways to give a token and ``opt_out`` the insecure opt-out, in the
    caller's terms (flags, or variables).
    """
    public = sorted({a for a in addresses if not is_local_address(a)})
    if not public:
        return None
    where = ", ".join(public)
    if settings.token is None:
        if settings.insecure_no_auth:
            return None
        return (f"{where} is reachable from other machines: give a token ({token_hint}), or "
                f"{opt_out} to show every process on this machine to anyone, without authentication")
    why = weakness(settings.token)
    if why is not None:
        return (f"the token is too weak for {where}, which other machines can reach: {why} "
                "(python -c 'import secrets; print(secrets.token_urlsafe(32))' makes a good one)")
    return None


def exposure_warnings(addresses: Iterable[str], settings: AppSettings) -> list[str]:
    """Lines to show loudly: serving without authentication, or a weak token on loopback."""
    addresses = list(addresses)
    public = sorted({a for a in addresses if not is_local_address(a)})
    if public and settings.token is None and settings.insecure_no_auth:
        return [f"serving on {', '.join(public)} WITHOUT AUTHENTICATION (insecure opt-out): anyone "
                "who can reach this port sees every GPU process on this machine: pids, users and "
                "program names. Give a token, or use an SSH tunnel, instead."]
    if settings.token is not None and not public:
        why = weakness(settings.token)
        if why is not None:
            return [f"the token is weak ({why}): other users of this machine can guess it; a "
                    "bind other machines can reach would refuse it"]
    return []


def listening_addresses(worker: Any) -> list[str]:
    """The addresses a gunicorn worker's listening sockets are bound to (``unix:PATH`` for Unix)."""
    found = []
    for listener in getattr(worker, "sockets", None) or ():
        name = listener.getsockname()
        if listener.family == socket.AF_UNIX:
            found.append("unix:" + (name if isinstance(name, str) else name.decode("utf-8", "replace")))
        else:
            found.append(str(name[0]))
    return found


def check_ui_file(path: str, where: str) -> None:
    """PreflightError unless ``path`` is a readable regular file of at most MAX_UI_BYTES.

    Looked at before it is opened (opening some devices does something), then opened without
    blocking and looked at again on the descriptor (the path may have changed in between).
    """
    try:
        _judge(os.stat(path), path, where)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise PreflightError(f"{where} {path}: {exc.strerror}") from None
    try:
        _judge(os.fstat(fd), path, where)
    finally:
        os.close(fd)


def _judge(st: os.stat_result, path: str, where: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise PreflightError(f"{where} {path}: not a regular file")
    if st.st_size > MAX_UI_BYTES:
        raise PreflightError(f"{where} {path}: {st.st_size} bytes, more than the "
                             f"{MAX_UI_BYTES >> 20} MiB a page may have")
