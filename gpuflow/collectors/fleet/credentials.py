"""The hub's credentials file: the bearer token for each agent, never on the command line.

A JSON object from a target (``host:port`` as in the targets file, or its URL) to the token that
agent wants; the key ``*`` gives the token of every target not named::

    {"gpu-node-1:7717": "Zq…", "*": "k3…"}

The file is judged as an agent judges its own token file (gpuflow.transport.tokens): a regular
file of the user running the hub, no access for group or others (``chmod 600``), at most
:data:`MAX_FILE_BYTES`; each token has the token's form (printable ASCII, no spaces, at most
1,024 characters). A token is sent only in the ``Authorization`` header of requests to its own
target (the hub follows no redirect). Errors never show a token.

Constraints: read once, when the hub starts (a changed file takes a restart); pure but for that.
"""

from __future__ import annotations

import json
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
