"""The fleet collector's options: which agents to follow, with which credentials, within which bounds.

Declared through ``declare_options`` under the key ``fleet``; the flags are offered by
``gpuflow hub`` only, the variables read by ``gpuflow hub`` and by ``get_app()`` under gunicorn:

============== ====================== ============================== ===========================
option         flag                   variable                       meaning
============== ====================== ============================== ===========================
targets_file   ``--targets FILE``     ``GPUFLOW_HUB_TARGETS_FILE``   Prometheus file_sd JSON, re-read on change
targets        ``--target URL`` (rep.) ``GPUFLOW_HUB_TARGETS`` (a,b)  agents' base URLs
srv            ``--srv NAME`` (rep.)  ``GPUFLOW_HUB_SRV`` (a,b)      DNS SRV names listing agents, asked again per TTL
srv_resolver   ``--srv-resolver IP``  ``GPUFLOW_HUB_SRV_RESOLVER``   the DNS server asked (/etc/resolv.conf's first)
credentials    ``--credentials FILE`` ``GPUFLOW_HUB_CREDENTIALS``    bearer tokens per target (chmod 600), re-read on change
ca_file        ``--ca-file FILE``     ``GPUFLOW_HUB_CA_FILE``        CA certificates for https targets
max_connecting                        ``GPUFLOW_HUB_MAX_CONNECTING`` agents connecting at once (64)
max_hosts                             ``GPUFLOW_HUB_MAX_HOSTS``      targets followed at most (2,000)
summary_frame_mb                      ``GPUFLOW_HUB_SUMMARY_FRAME_MB`` largest summary frame taken (16)
detail_frame_mb                       ``GPUFLOW_HUB_DETAIL_FRAME_MB`` largest full-detail frame taken (64)
publish_ms                            ``GPUFLOW_HUB_PUBLISH_MS``     the most often agents' frames make a hub frame (250)
============== ====================== ============================== ===========================

A file is read when the option is resolved (as the agent is made), so a missing or malformed
targets or credentials file, or a CA file that holds no certificate, stops the hub at start with
one line naming the flag or variable. The collector is idle unless some target is given.

Constraints: pure but for reading those files; imports no network library.
"""

from __future__ import annotations

import ssl
from typing import Any

from gpuflow.collectors.fleet.credentials import Credentials, CredentialsFile
from gpuflow.collectors.fleet.srv import SrvName, parse_resolver, parse_srv_name
from gpuflow.collectors.fleet.targets import (
    MAX_FILE_BYTES, Target, TargetError, parse_url, read_small_file, read_targets_file, unique,
)
from gpuflow.core.options import Option, PluginOptions

KEY = "fleet"
DEFAULT_MAX_HOSTS = 2000
HUB = ("hub",)


def _path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a file name")
    return value.strip()


def targets_file(value: Any) -> str | None:
    """A targets file, read and checked now (it is read again whenever it changes)."""
    if value is None:
        return None
    path = _path(value)
    read_targets_file(path, max_targets=10**9)
    return path


def _listed(value: Any, kind: type, what: str) -> list:
    """A repeated flag's values: ``kind`` objects as given, and every comma-separated text of a
    list (or of one text); anything else is refused as not ``what``."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"expected {what}")
    found = []
    for item in value:
        if isinstance(item, kind):
            found.append(item)
        else:
            found += [text.strip() for text in str(item).split(",") if text.strip()]
    return found


def target_urls(value: Any) -> tuple[Target, ...]:
    """Agents' URLs: a list (a repeated flag), or text with URLs separated by commas."""
    found = []
    for item in _listed(value, Target, "agents' URLs"):
        if isinstance(item, Target):
            found.append(item)
            continue
        try:
            found.append(parse_url(item, "target"))
        except TargetError as exc:
            raise ValueError(str(exc).removeprefix("target: ")) from None
    return unique(found)


def srv_names(value: Any) -> tuple[SrvName, ...]:
    """DNS SRV names: a list (a repeated flag), or text with names separated by commas."""
    found = [item if isinstance(item, SrvName) else parse_srv_name(item)
             for item in _listed(value, SrvName, "DNS SRV names such as _gpuflow._tcp.example.org")]
    return tuple(dict.fromkeys(found))


def srv_resolver(value: Any) -> tuple[str, int] | None:
    if value is None or isinstance(value, tuple):
        return value
    return parse_resolver(str(value))


def credentials(value: Any) -> Credentials | CredentialsFile | None:
    """The credentials file, read and checked now (and again whenever it changes)."""
    if value is None or isinstance(value, (Credentials, CredentialsFile)):
        return value
    return CredentialsFile(_path(value), "file")


def ca_file(value: Any) -> str | None:
    """A PEM file of CA certificates, checked by loading it."""
    if value is None:
        return None
    path = _path(value)
    try:
        read_small_file(path, "file", MAX_FILE_BYTES)
        ssl.create_default_context(cafile=path)
    except (TargetError, ssl.SSLError, OSError) as exc:
        raise ValueError(f"no CA certificates could be read from it ({exc})") from None
    return path


def _whole(low: int, high: int):
    def convert(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(f"expected a whole number, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a whole number, got {value!r}") from None
        if not low <= number <= high:
            raise ValueError(f"must be between {low} and {high}, got {number}")
        return number
    return convert


OPTIONS = PluginOptions(KEY, (
    Option("targets_file", targets_file, None,
           "follow the agents listed in this Prometheus file_sd JSON file (re-read when it changes)",
           flag="--targets", env="GPUFLOW_HUB_TARGETS_FILE", metavar="FILE", commands=HUB),
    Option("targets", target_urls, (), "follow the agent at this URL (repeatable)",
           flag="--target", env="GPUFLOW_HUB_TARGETS", metavar="URL", commands=HUB, repeatable=True),
    Option("srv", srv_names, (), "follow the agents this DNS SRV name lists (repeatable; "
           "https://NAME for https agents), asked again as its TTL runs out",
           flag="--srv", env="GPUFLOW_HUB_SRV", metavar="NAME", commands=HUB, repeatable=True),
    Option("srv_resolver", srv_resolver, None, "the DNS server --srv asks, IP[:PORT] "
           "(default: the first nameserver of /etc/resolv.conf)",
           flag="--srv-resolver", env="GPUFLOW_HUB_SRV_RESOLVER", metavar="IP", commands=HUB),
    Option("credentials", credentials, None,
           "bearer tokens per target: a JSON object from host:port (or '*') to token; yours, chmod 600 "
           "(re-read when it changes)",
           flag="--credentials", env="GPUFLOW_HUB_CREDENTIALS", metavar="FILE", commands=HUB),
    Option("ca_file", ca_file, None, "CA certificates (PEM) to check https agents against "
           "(default: the system's)", flag="--ca-file", env="GPUFLOW_HUB_CA_FILE", metavar="FILE",
           commands=HUB),
    Option("max_connecting", _whole(1, 1024), 64, "agents the hub connects to at once",
           env="GPUFLOW_HUB_MAX_CONNECTING", commands=HUB),
    Option("max_hosts", _whole(1, 100_000), DEFAULT_MAX_HOSTS, "targets followed at most",
           env="GPUFLOW_HUB_MAX_HOSTS", commands=HUB),
    Option("summary_frame_mb", _whole(1, 1024), 16, "the largest summary frame taken from an agent, MiB",
           env="GPUFLOW_HUB_SUMMARY_FRAME_MB", commands=HUB),
    Option("detail_frame_mb", _whole(1, 4096), 64, "the largest full frame taken from an agent, MiB",
           env="GPUFLOW_HUB_DETAIL_FRAME_MB", commands=HUB),
    Option("publish_ms", _whole(10, 10_000), 250,
           "agents' frames make a hub frame at most this often (state changes at once)",
           env="GPUFLOW_HUB_PUBLISH_MS", commands=HUB),
))
